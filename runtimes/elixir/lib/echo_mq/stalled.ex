defmodule EchoMQ.Stalled do
  @moduledoc """
  The opt-in stalled sweep (the seeds' `EchoMQ.Stalled`): a client-side timer, re-armed after
  every sweep, that runs **sweep_stalled** on a queue: jobs whose lease ran out go back to
  pending, or end dead (`failed`, reason `stalled`) past `max_stalled` recoveries. A consumer
  with `recovery: :stalled` runs the same pass in its beat; this process is for a queue whose
  consumers run `recovery: :off`, or for a node that only watches.

  Options: `:queue`, `:conn` or `:url`, `:interval_ms` (5000), `:max_stalled` (1), `:batch`
  (100), `:name`.
  """
  use GenServer

  alias EchoMQ.{Connector, Jobs, Keyspace}

  def start_link(opts) do
    gen = if opts[:name], do: [name: opts[:name]], else: []
    GenServer.start_link(__MODULE__, opts, gen)
  end

  def child_spec(opts), do: %{id: opts[:id] || __MODULE__, start: {__MODULE__, :start_link, [opts]}}

  @doc """
  One sweep: `{:ok, %{recovered: ids, dead: ids}}`. `expected_ms` is the longest gap expected
  between two sweeps (SPEC 2.1: a longer one is a clock jump).
  """
  def check(conn, queue, opts \\ []) do
    argv = [Keyspace.prefix(queue), opts[:max_stalled] || 1, opts[:batch] || 100, opts[:expected_ms] || 1_000]

    case Jobs.run(conn, queue, "sweep_stalled", nil, argv) do
      {:ok, [recovered, dead | _]} -> {:ok, %{recovered: recovered, dead: dead}}
      err -> err
    end
  end

  @impl true
  def init(opts) do
    conn = opts[:conn] || Connector.connect!(Keyword.take(opts, [:url, :host, :port, :scripts_dir]))
    interval = opts[:interval_ms] || 5_000

    s = %{
      conn: conn,
      queue: opts[:queue],
      interval_ms: interval,
      opts: [max_stalled: opts[:max_stalled], batch: opts[:batch], expected_ms: interval]
    }

    {:ok, arm(s)}
  end

  @impl true
  def handle_info(:sweep, s) do
    _ = check(s.conn, s.queue, s.opts)
    {:noreply, arm(s)}
  end

  defp arm(s) do
    Process.send_after(self(), :sweep, s.interval_ms)
    s
  end
end
