defmodule EchoMQ.CLI do
  @moduledoc """
  A command-line driver, as runtimes/go's emq-go, for the cross-runtime test and for people:

      elixir -pa _build/dev/lib/echo_mq/ebin -e 'EchoMQ.CLI.main(System.argv())' -- CMD ...

  * `produce --url U --queue Q`: stdin a JSON array of `{data, name, group, priority,
    attempts, backoff, delayMs}`; stdout a JSON array of `{id, status}`.
  * `consume --url U --queue Q [--concurrency N --lease-ms N --beat-ms N]`: one JSON line per
    `ready`, `completed`, `failed`, `lost`; closes gracefully at the end of stdin.
  * `conformance --url U`: replays every conformance case (flushes the database); stdout
    `{passed, total, failures}`.

  The consume handler is the cross-runtime test's: `sleepMs`, `progress` (`{at, by: "ex"}`),
  `unrecoverable`, `fail` (attempts up to it fail); the result `{by: "ex", attempt, data}`.
  """

  alias EchoMQ.{Connector, Consumer, Jobs, JSON}

  def main(argv) do
    {opts, [cmd | _], _} =
      OptionParser.parse(List.delete(argv, "--"),
        strict: [url: :string, queue: :string, concurrency: :integer, lease_ms: :integer, beat_ms: :integer]
      )

    code = run(cmd, opts)
    System.halt(code)
  end

  defp run("produce", o) do
    conn = Connector.connect!(url: o[:url])
    specs = JSON.decode!(IO.read(:stdio, :eof))

    out =
      Enum.map(specs, fn spec ->
        id = Jobs.new_id()
        payload = JSON.encode!(spec["data"])
        opts = job_opts(spec)

        r =
          case spec["delayMs"] do
            nil -> Jobs.enqueue(conn, o[:queue], id, payload, opts)
            ms -> Jobs.enqueue_in(conn, o[:queue], id, payload, ms, opts)
          end

        status =
          case r do
            {:ok, {:deduplicated, kept}} -> %{"id" => kept, "status" => "deduplicated"}
            {:ok, s} -> %{"id" => id, "status" => Atom.to_string(s)}
            {:error, e} -> %{"id" => id, "status" => "error", "error" => inspect(e)}
          end

        status
      end)

    IO.puts(JSON.encode!(out))
    0
  end

  defp run("consume", o) do
    me = self()

    handler = fn job ->
      d = job.data || %{}
      if ms = d["sleepMs"], do: Process.sleep(ms)
      if d["progress"], do: Consumer.progress(job, %{"at" => job.attempts, "by" => "ex"})

      cond do
        d["unrecoverable"] -> {:unrecoverable, "ex: unrecoverable"}
        job.attempts <= (d["fail"] || 0) -> {:error, "ex: attempt #{job.attempts} fails on purpose"}
        true -> {:ok, %{"by" => "ex", "attempt" => job.attempts, "data" => d}}
      end
    end

    {:ok, pid} =
      Consumer.start_link(
        url: o[:url],
        queue: o[:queue],
        handler: handler,
        notify: me,
        concurrency: o[:concurrency] || 10,
        lease_ms: o[:lease_ms] || 30_000,
        beat_ms: o[:beat_ms] || 1_000
      )

    line(%{"kind" => "ready"})
    spawn_link(fn -> drain_stdin(me) end)
    loop(pid)
  end

  defp run("conformance", o) do
    conn = Connector.connect!(url: o[:url])
    r = EchoMQ.Conformance.replay_all(conn)
    IO.puts(JSON.encode!(%{"passed" => r.passed, "total" => r.total, "failures" => r.failures}))
    if r.failures == [], do: 0, else: 1
  end

  # upsert --url U --queue Q: stdin a JSON array of {id, repeat: {every | pattern, limit, ...},
  # name, data}; stdout a JSON array of {status, nextRunAt, jobId}.
  defp run("upsert", o) do
    conn = Connector.connect!(url: o[:url])

    out =
      for spec <- JSON.decode!(IO.read(:stdio, :eof)) do
        repeat =
          for {k, v} <- spec["repeat"], into: %{} do
            {%{
               "every" => :every,
               "pattern" => :pattern,
               "limit" => :limit,
               "immediately" => :immediately,
               "startDate" => :start_date,
               "endDate" => :end_date,
               "tz" => :tz
             }[k] || k, v}
          end

        case EchoMQ.JobScheduler.upsert(
               conn,
               o[:queue],
               spec["id"],
               repeat,
               spec["name"],
               spec["data"] || %{}
             ) do
          {:ok, r} ->
            %{"status" => Atom.to_string(r.status), "nextRunAt" => r.next_run_at, "jobId" => r.job_id}

          {:error, e} ->
            %{"status" => "error", "error" => inspect(e)}
        end
      end

    IO.puts(JSON.encode!(out))
    0
  end

  defp run(cmd, _) do
    IO.puts(:stderr, "emq-ex: unknown command #{cmd}: give produce, consume, upsert or conformance")
    2
  end

  defp loop(pid) do
    receive do
      {:echomq_consumer, kind, id, info} when kind in [:completed, :failed, :lost] ->
        line(%{
          "kind" => Atom.to_string(kind),
          "id" => id,
          "attempt" => info[:attempt],
          "outcome" => info[:outcome]
        })

        loop(pid)

      :stdin_closed ->
        :ok = Consumer.close(pid)
        # Outcomes the close flushed are in the mailbox already.
        flush_lines()
        0

      _ ->
        loop(pid)
    end
  end

  defp flush_lines do
    receive do
      {:echomq_consumer, kind, id, info} when kind in [:completed, :failed, :lost] ->
        line(%{
          "kind" => Atom.to_string(kind),
          "id" => id,
          "attempt" => info[:attempt],
          "outcome" => info[:outcome]
        })

        flush_lines()
    after
      0 -> :ok
    end
  end

  defp drain_stdin(me) do
    case IO.read(:stdio, :line) do
      :eof -> send(me, :stdin_closed)
      {:error, _} -> send(me, :stdin_closed)
      _ -> drain_stdin(me)
    end
  end

  defp line(map), do: IO.puts(JSON.encode!(Map.reject(map, fn {_, v} -> is_nil(v) end)))

  defp job_opts(spec) do
    [
      name: spec["name"],
      group: spec["group"],
      priority: spec["priority"],
      attempts: spec["attempts"],
      backoff: spec["backoff"] && elem(EchoMQ.Backoff.from_map(spec["backoff"]), 1),
      dedupe:
        spec["dedupe"] &&
          %{key: spec["dedupe"]["key"], mode: spec["dedupe"]["mode"], ttl_ms: spec["dedupe"]["ttlMs"]}
    ]
    |> Enum.reject(fn {_, v} -> is_nil(v) end)
  end
end
