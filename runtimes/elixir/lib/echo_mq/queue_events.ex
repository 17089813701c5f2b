defmodule EchoMQ.QueueEvents do
  @moduledoc """
  A reader of a queue's events stream (`emq:{queue}:events`, SPEC 16), delivering every event
  to its subscribers as `{:echomq_event, type, data}`: `type` an atom of the vocabulary
  (`:added`, `:waiting`, `:active`, `:progress`, `:completed`, `:failed`, `:delayed`,
  `:stalled`, `:removed`, `:drained`, `:paused`, `:resumed`, `:deduplicated`,
  `:retries_exhausted`, `:waiting_children`, `:cleaned`, `:updated`; an event a later level
  adds arrives as its name, a string), `data` the entry's fields (`"id"` the job, plus
  `"stream_id"`). An entry for several jobs (`ids`, plurals) is expanded into one event per job
  (SPEC 16). It blocks on `XREAD COUNT 500 BLOCK 5000` on a connection of its own, in a process
  of its own, resuming from the last id it saw; `last_event_id: "$"` (default: new events
  only) is pinned to the stream's last id first, so a reconnect resumes from it; `"0"` replays.

  Options: `:queue`, `:conn` or `:url`, `:last_event_id`, `:block_ms` (5000), `:count` (500),
  `:handler` (a module of the `EchoMQ.QueueEvents.Handler` behaviour, called in this process),
  `:name`. Supervised by the host.
  """
  use GenServer

  alias EchoMQ.{Connector, Jobs, Keyspace}

  defmodule Handler do
    @moduledoc "In-process handling of every event, beside the subscriber messages."
    @callback handle_event(type :: atom() | String.t(), data :: map(), queue :: String.t()) :: any()
  end

  @types ~w(added waiting active progress completed failed delayed stalled removed drained paused
            resumed duplicated deduplicated retries_exhausted waiting_children cleaned updated)

  def start_link(opts) do
    gen = if opts[:name], do: [name: opts[:name]], else: []
    GenServer.start_link(__MODULE__, opts, gen)
  end

  def child_spec(opts), do: %{id: opts[:id] || __MODULE__, start: {__MODULE__, :start_link, [opts]}}

  @doc "Delivers every later event to `pid` (default the caller)."
  def subscribe(server, pid \\ self()), do: GenServer.call(server, {:subscribe, pid})
  @doc "Stops delivering to `pid`."
  def unsubscribe(server, pid \\ self()), do: GenServer.call(server, {:unsubscribe, pid})
  @doc "Stops the reader and closes its connection."
  def close(server), do: GenServer.stop(server, :normal)

  @doc "The event type an entry's name stands for."
  def parse_event_type(name) when name in @types, do: String.to_atom(name)
  def parse_event_type(name), do: name

  @doc "One entry's flat fields expanded into its events (several when it has `ids`)."
  def expand(stream_id, flat) do
    fields = Jobs.pairs(flat)

    case fields["ids"] do
      nil ->
        [Map.put(fields, "stream_id", stream_id)]

      ids ->
        ids = String.split(ids, " ")

        plurals =
          for {k, v} <- fields,
              k != "ids",
              Map.has_key?(fields, String.trim_trailing(k, "s")) and String.ends_with?(k, "s"),
              into: %{},
              do: {k, String.split(v, " ")}

        base = Map.drop(fields, ["ids" | Map.keys(plurals)])

        ids
        |> Enum.with_index()
        |> Enum.map(fn {id, i} ->
          Enum.reduce(plurals, %{base | "id" => id}, fn {k, vs}, acc ->
            Map.put(acc, String.trim_trailing(k, "s"), Enum.at(vs, i))
          end)
          |> Map.put("stream_id", stream_id)
        end)
    end
  end

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    queue = opts[:queue] || raise ArgumentError, "EchoMQ.QueueEvents needs queue: \"name\""
    conn = opts[:conn] || Connector.connect!(Keyword.take(opts, [:url, :host, :port, :scripts_dir]))
    {:ok, bconn} = Connector.blocking(conn)
    key = Keyspace.queue_key(queue, "events")

    last =
      case opts[:last_event_id] || "$" do
        "$" ->
          case Connector.command(conn, ["XREVRANGE", key, "+", "-", "COUNT", "1"]) do
            {:ok, [[id, _]]} -> id
            _ -> "0-0"
          end

        id ->
          id
      end

    s = %{
      queue: queue,
      key: key,
      bconn: bconn,
      subs: %{},
      handler: opts[:handler],
      last: last,
      block: opts[:block_ms] || 5_000,
      count: opts[:count] || 500,
      reader: nil
    }

    {:ok, read(s)}
  end

  @impl true
  def handle_call({:subscribe, pid}, _, s) do
    if Map.has_key?(s.subs, pid),
      do: {:reply, :ok, s},
      else: {:reply, :ok, put_in(s.subs[pid], Process.monitor(pid))}
  end

  def handle_call({:unsubscribe, pid}, _, s) do
    case Map.pop(s.subs, pid) do
      {nil, _} ->
        {:reply, :ok, s}

      {ref, subs} ->
        Process.demonitor(ref, [:flush])
        {:reply, :ok, %{s | subs: subs}}
    end
  end

  @impl true
  def handle_info({:read, pid, result}, %{reader: pid} = s) do
    s = %{s | reader: nil}

    case result do
      {:ok, [[_key, entries]]} ->
        for [id, flat] <- entries, event <- expand(id, flat), do: deliver(s, event)
        [last, _] = List.last(entries)
        {:noreply, read(%{s | last: last})}

      {:ok, nil} ->
        {:noreply, read(s)}

      {:error, _} ->
        # A lost connection: eredis reconnects; read again after a pause, from the last id.
        Process.send_after(self(), :again, 500)
        {:noreply, s}
    end
  end

  def handle_info(:again, s), do: {:noreply, read(s)}

  def handle_info({:DOWN, _, :process, pid, _}, s), do: {:noreply, %{s | subs: Map.delete(s.subs, pid)}}

  def handle_info({:EXIT, pid, _}, %{reader: pid} = s) do
    Process.send_after(self(), :again, 500)
    {:noreply, %{s | reader: nil}}
  end

  def handle_info(_, s), do: {:noreply, s}

  @impl true
  def terminate(_, s) do
    if s.reader, do: Process.exit(s.reader, :kill)
    Connector.close_blocking(s.bconn)
  end

  defp deliver(s, event) do
    type = parse_event_type(event["event"])
    data = Map.delete(event, "event")
    for {pid, _} <- s.subs, do: send(pid, {:echomq_event, type, data})
    if s.handler, do: s.handler.handle_event(type, data, s.queue)
  end

  defp read(s) do
    me = self()
    %{bconn: b, key: key, last: last, block: block, count: count} = s

    pid =
      spawn_link(fn ->
        r =
          Connector.command(
            b,
            ["XREAD", "COUNT", count, "BLOCK", block, "STREAMS", key, last],
            block + 10_000
          )

        send(me, {:read, self(), r})
      end)

    %{s | reader: pid}
  end
end
