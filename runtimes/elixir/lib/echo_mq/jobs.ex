defmodule EchoMQ.Jobs do
  @moduledoc """
  Admission and reading (the seeds' `EchoMQ.Jobs`): `enqueue/5`, `enqueue_at/6`,
  `enqueue_in/6`, `get/3`, and the `hello/2` every queue handle says first.

  A payload is JSON text (a binary, as the seeds' guards say): encode terms with
  `EchoMQ.JSON.encode!/1`. Returns are the seeds' shapes: `{:ok, :enqueued | :scheduled}`,
  `{:ok, :duplicate}` (the id exists: an idempotent no-op), `{:ok, {:deduplicated, kept_id}}`,
  `{:error, :kind}` (the id is not `JOB`-namespaced), `{:error, {:input, why}}`,
  `{:error, :too_big}`, `{:error, {:server, msg}}` / `{:error, {:connection, reason}}`.

  Options (`opts`): `:name`, `:group`, `:priority` (0 none, lower first), `:attempts`
  (default 3, SPEC 25.1), `:backoff` (a `EchoMQ.Backoff` policy tuple), `:dedupe`
  (`%{key: k, mode: :throttle | :debounce, ttl_ms: n}`).
  """

  alias EchoMQ.{Connector, Keyspace, JSON}

  @versions {1, 2}
  # New queues start at 2: the previous release already speaks 1 and 2 (SPEC 22.4).
  @default_version 2
  @known_level 2
  @max_payload 512 * 1024

  @doc "The protocol versions this runtime speaks (hello's lowest and highest; SPEC 22.4)."
  def versions, do: @versions

  @doc "The version hello stamps on a queue that has none, unless connect's `protocol_version` says otherwise."
  def default_version, do: @default_version
  @doc "The SPEC feature level this runtime was written for (SPEC 22.2)."
  def known_level, do: @known_level

  @doc "A fresh minted job id (SPEC 3)."
  defdelegate new_id(), to: EchoMQ.Ids, as: :mint

  @doc """
  Stamps or checks the queue's protocol version, once per connection and queue: passes the
  versions this runtime speaks (1..2) and learns the one to speak here. `{:ok, %{version:,
  level:, features:}}`, or `{:error, {:protocol, why}}` for a queue at a version it does not speak.
  """
  @spec hello(Connector.t(), String.t()) :: {:ok, map()} | {:error, term()}
  def hello(conn, queue) do
    case Connector.hello_cache(conn, queue) do
      %{} = g -> {:ok, g}
      _ -> say_hello(conn, queue)
    end
  end

  defp say_hello(conn, queue) do
    with :ok <- Keyspace.check_name("queue name", queue) do
      {lo, hi} = @versions
      # For tools; best effort.
      _ = Connector.command(conn, ["SADD", "emq:queues", queue])

      case Connector.eval(conn, "hello", [Keyspace.queue_key(queue, "meta")], [conn.protocol_version, lo, hi]) do
        {:ok, reply} ->
          g = greeting(reply)

          if g.version in lo..hi do
            Connector.put_hello(conn, queue, g)
            {:ok, g}
          else
            {:error,
             {:protocol,
              "queue #{queue} is at protocol version #{g.version}, this runtime speaks #{lo}..#{hi}"}}
          end

        {:error, {:server, "EMQPROTOCOL" <> _ = msg}} ->
          {:error, {:protocol, msg}}

        err ->
          err
      end
    end
  end

  # The evolution rule (SPEC 22.1): the entries this runtime knows, by position; a bare
  # integer is a level-1 reply.
  defp greeting([v | rest]) do
    level =
      case rest do
        [l | _] -> Connector.int(l)
        _ -> 1
      end

    features =
      case rest do
        [_, f | _] when is_list(f) -> f
        _ -> []
      end

    %{version: Connector.int(v), level: level, features: features}
  end

  defp greeting(v), do: %{version: Connector.int(v), level: 1, features: []}

  @doc "Runs a verb on a queue after hello (KEYS from the script's contract)."
  def run(conn, queue, verb, job_id, argv) do
    with {:ok, _} <- hello(conn, queue) do
      Connector.run(conn, queue, verb, job_id, argv)
    end
  end

  @doc "Admits a job that can run now; idempotent on the id."
  def enqueue(conn, queue, job_id, payload, opts \\ [])
      when is_binary(job_id) and is_binary(payload) do
    with {:ok, t} <- admission(job_id, payload, opts),
         {:ok, [r]} <- run(conn, queue, "enqueue", nil, [Keyspace.prefix(queue) | t]) do
      admitted(r, :enqueued)
    else
      other -> map_error(other)
    end
  end

  @doc "Admits many `{job_id, payload, opts}` in one call; one outcome per job, in order."
  def enqueue_many(conn, queue, jobs) when is_list(jobs) do
    tuples = Enum.map(jobs, fn {id, payload, opts} -> admission(id, payload, opts) end)

    case Enum.find(tuples, &match?({:error, _}, &1)) do
      nil ->
        argv = [Keyspace.prefix(queue) | Enum.flat_map(tuples, fn {:ok, t} -> t end)]

        case run(conn, queue, "enqueue", nil, argv) do
          {:ok, replies} -> {:ok, Enum.map(replies, &elem(admitted(&1, :enqueued), 1))}
          other -> map_error(other)
        end

      err ->
        err
    end
  end

  @doc "Admits a job claimable at `run_at_ms` (epoch ms, judged on the server's clock)."
  def enqueue_at(conn, queue, job_id, payload, run_at_ms, opts \\ [])
      when is_binary(job_id) and is_binary(payload) and is_integer(run_at_ms) do
    schedule(conn, queue, job_id, payload, "at", run_at_ms, opts)
  end

  @doc "Admits a job claimable `delay_ms` from now, measured on the SERVER clock."
  def enqueue_in(conn, queue, job_id, payload, delay_ms, opts \\ [])
      when is_binary(job_id) and is_binary(payload) and is_integer(delay_ms) and delay_ms >= 0 do
    schedule(conn, queue, job_id, payload, "in", delay_ms, opts)
  end

  defp schedule(conn, queue, job_id, payload, mode, value, opts) do
    with {:ok, [id, payload | rest]} <- admission(job_id, payload, opts),
         {:ok, r} <- run(conn, queue, "schedule", id, [id, payload, mode, Integer.to_string(value) | rest]) do
      admitted(r, :scheduled)
    else
      other -> map_error(other)
    end
  end

  defp admitted(r, added) do
    case r do
      "1" -> {:ok, added}
      1 -> {:ok, added}
      "0" -> {:ok, :duplicate}
      0 -> {:ok, :duplicate}
      id when is_binary(id) -> {:ok, {:deduplicated, id}}
    end
  end

  defp map_error({:error, {:server, "EMQKIND" <> _}}), do: {:error, :kind}
  defp map_error({:error, {:server, "EMQINPUT " <> why}}), do: {:error, {:input, why}}
  defp map_error(other), do: other

  # The 9-tuple of enqueue (SPEC 19.2): id payload priority group name max backoff dedupe_key
  # dedupe_spec, every field checked above the wire first.
  defp admission(id, payload, opts) do
    opts = Map.new(opts)

    with :ok <- EchoMQ.Ids.check(id),
         :ok <- check_payload(payload),
         {:ok, prio} <- whole(opts[:priority] || 0, 0, 2_097_152, "priority"),
         {:ok, max} <- whole(opts[:attempts] || 3, 1, 1_000_000, "attempts"),
         :ok <- if(opts[:group], do: Keyspace.check_name("group", opts[:group]), else: :ok),
         {:ok, backoff} <- backoff_json(opts[:backoff]),
         {:ok, dk, ds} <- dedupe(opts[:dedupe]) do
      {:ok, [id, payload, prio, opts[:group] || "", to_string(opts[:name] || ""), max, backoff, dk, ds]}
    end
  end

  defp check_payload(p), do: check_json(p, "payload")

  @doc false
  # JSON text within the payload cap (SPEC 17), `what` naming it in the error: the payload of a
  # job, the data of an update, a cadence's template.
  def check_json(text, _what) when is_binary(text) and byte_size(text) > @max_payload, do: {:error, :too_big}

  def check_json(text, what) when is_binary(text) do
    case JSON.decode(text) do
      {:ok, _} -> :ok
      {:error, why} -> {:error, {:input, "#{what} must be JSON text (EchoMQ.JSON.encode!/1): #{why}"}}
    end
  end

  def check_json(other, what),
    do: {:error, {:input, "#{what} must be JSON text (a binary), got #{inspect(other)}"}}

  defp whole(n, lo, hi, _) when is_integer(n) and n >= lo and n <= hi, do: {:ok, Integer.to_string(n)}

  defp whole(n, lo, hi, what),
    do: {:error, {:input, "#{what} must be a whole number from #{lo} to #{hi}, got #{inspect(n)}"}}

  defp backoff_json(nil), do: {:ok, ""}

  defp backoff_json(policy) do
    _ = EchoMQ.Backoff.delay_ms(policy, 1)
    {:ok, JSON.encode!(EchoMQ.Backoff.to_map(policy))}
  rescue
    e in ArgumentError -> {:error, {:input, Exception.message(e)}}
  end

  defp dedupe(nil), do: {:ok, "", ""}

  defp dedupe(%{key: k, mode: m} = d)
       when is_binary(k) and byte_size(k) in 1..200 and m in [:throttle, :debounce, "throttle", "debounce"] do
    ttl = d[:ttl_ms]
    spec = to_string(m) <> if(is_integer(ttl) and ttl > 0, do: ":#{ttl}", else: "")
    {:ok, k, spec}
  end

  defp dedupe(d),
    do:
      {:error,
       {:input,
        "dedupe must be %{key: \"1-200 chars\", mode: :throttle | :debounce, ttl_ms: n}, got #{inspect(d)}"}}

  @doc """
  Reads a job's row (SPEC 5), decoded per 5.1: `{:ok, map}` or `{:ok, nil}` when no job has
  that id. Fields as the TypeScript JobView names them (`"maxAttempts"`, `"createdAt"` …).
  """
  def get(conn, queue, job_id) do
    with :ok <- EchoMQ.Ids.check(job_id) do
      case Connector.pipeline(conn, [
             ["HGETALL", Keyspace.job_key(queue, job_id)],
             ["HGET", Keyspace.queue_key(queue, "meta"), "version"]
           ]) do
        [{:ok, []}, _] -> {:ok, nil}
        [{:ok, flat}, {:ok, version}] -> {:ok, decode_row(job_id, pairs(flat), version)}
        [{:error, _} = e, _] -> e
        {:error, _} = e -> e
      end
    end
  end

  @doc false
  def pairs(flat), do: flat |> Enum.chunk_every(2) |> Map.new(fn [k, v] -> {k, v} end)

  @doc "A row decoded into the TypeScript JobView's fields (absent fields take SPEC defaults)."
  def decode_row(id, row, version) do
    num = fn k -> row[k] && String.to_integer(String.trim(row[k])) end
    without_max = if(version && String.to_integer(version) >= 2, do: 3, else: 1)

    %{
      "id" => id,
      "name" => row["name"],
      "state" => row["state"],
      "data" => json_or_text(row["payload"]),
      "attempts" => num.("attempts") || 0,
      "maxAttempts" => num.("max") || without_max,
      "result" => row["result"] && json_or_text(row["result"]),
      "error" => row["error"] && %{"message" => row["error"], "stack" => row["stack"] || ""},
      "lastError" =>
        row["last_error"] && %{"message" => row["last_error"], "stack" => row["last_stack"] || ""},
      "progress" => row["progress"] && json_or_text(row["progress"]),
      "group" => row["group"],
      "priority" => (row["prio"] not in [nil, ""] && num.("prio")) || nil,
      "backoff" => (row["backoff"] not in [nil, ""] && json_or_text(row["backoff"])) || nil,
      "stalled" => num.("stalled") || 0,
      "cancelRequested" => row["cancel"] == "1",
      "createdAt" => num.("created") || EchoMQ.Ids.minted_at(id),
      "runAt" => num.("runat"),
      "startedAt" => num.("started"),
      "finishedAt" => num.("finished"),
      "consumer" => row["consumer"]
    }
    |> Enum.reject(fn {_, v} -> is_nil(v) end)
    |> Map.new()
  end

  defp json_or_text(nil), do: nil

  defp json_or_text(v) do
    case JSON.decode(v) do
      {:ok, d} -> d
      _ -> v
    end
  end

  @doc """
  Releases due scheduled jobs (the seeds' `@promote`), on the server clock: `{:ok, count}`.
  With `next: true` (a consumer's timer) `{:ok, %{count:, now_ms:, next_due_ms:, handoffs:}}`;
  `elapsed_ms` the ms since the caller's previous promote (SPEC 2.1).
  """
  def promote(conn, queue, batch, opts \\ []) do
    argv =
      if opts[:next] do
        [Keyspace.prefix(queue), batch, "next" | List.wrap(opts[:elapsed_ms])]
      else
        [Keyspace.prefix(queue), batch]
      end

    case run(conn, queue, "promote", nil, argv) do
      {:ok, [c, now, next | rest]} ->
        {:ok,
         %{
           count: Connector.int(c),
           now_ms: Connector.int(now),
           next_due_ms: Connector.int(next),
           handoffs: Connector.int(List.first(rest) || 0)
         }}

      {:ok, n} ->
        {:ok, Connector.int(n)}

      err ->
        err
    end
  end

  @doc "Stores a running job's progress (JSON text): `:ok`, `{:error, :lease}` or `{:error, :no_job}`."
  def progress(conn, queue, job_id, token, progress_json) do
    case run(conn, queue, "progress", job_id, [job_id, token, progress_json]) do
      {:ok, _} -> :ok
      {:error, {:server, "EMQLEASE" <> _}} -> {:error, :lease}
      {:error, {:server, "EMQNOJOB" <> _}} -> {:error, :no_job}
      err -> err
    end
  end

  @doc "Cancels a waiting job (`{:ok, \"cancelled\"}`) or asks a running one to stop (`\"requested\"`)."
  def cancel(conn, queue, job_id), do: run(conn, queue, "cancel", job_id, [Keyspace.prefix(queue), job_id])
end
