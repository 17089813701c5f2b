defmodule EchoMQ.Admin do
  @moduledoc """
  The operator verbs a service calls on a queue, over the scripts the TypeScript and Go
  runtimes call (SPEC 19): pausing and resuming the queue, changing a job that has not started
  (`promote/3`, `reschedule_at/4`, `reschedule_in/4`, `reprioritize/4`, `update/4`), removing
  one, retrying ended ones (`retry/3`, `retry_all/3`), deleting ended or waiting jobs
  (`clean/5`, `drain/3`), `counts/2`, and `wait_for/4`, which waits for a job's end.

  Every function takes the connection and the queue first and says hello before its first call
  (`EchoMQ.Jobs.run/5`). Returns are the runtime's shapes: `:ok` / `{:ok, value}`,
  `{:error, :no_job}` (no job has that id), `{:error, {:state, message}}` (the job is in a state
  the verb does not apply to: the message says which), `{:error, :kind}` (not a `JOB` id),
  `{:error, {:input, why}}`, `{:error, :too_big}`, `{:error, {:server, msg}}`,
  `{:error, {:connection, reason}}`.
  """

  alias EchoMQ.{Connector, Jobs, Keyspace}

  @ended ~w(completed dead cancelled)

  @doc "Holds the whole queue: no claims until `resume/2`; running jobs finish. `{:ok, true}` when it was running."
  def pause(conn, queue), do: flag(conn, queue, "pause")

  @doc "Lets a paused queue run again. `{:ok, true}` when it was paused."
  def resume(conn, queue), do: flag(conn, queue, "resume")

  defp flag(conn, queue, verb) do
    with {:ok, n} <- Jobs.run(conn, queue, verb, nil, [Keyspace.prefix(queue)]) do
      {:ok, Connector.int(n) == 1}
    end
  end

  # ── changing a job that has not started ────────────────────────────────────

  @doc "Runs a scheduled job now (pending, in its lane when it has one)."
  def promote(conn, queue, job_id) do
    with :ok <- EchoMQ.Ids.check(job_id) do
      job_verb(conn, queue, "promote_job", job_id, [job_id]) |> done()
    end
  end

  @doc "Moves a job that has not started to run at `run_at_ms` (epoch ms, server clock): `{:ok, run_at_ms}`."
  def reschedule_at(conn, queue, job_id, run_at_ms) when is_integer(run_at_ms) and run_at_ms >= 0,
    do: reschedule(conn, queue, job_id, "at", run_at_ms)

  def reschedule_at(_, _, _, run_at_ms),
    do: {:error, {:input, "run_at_ms must be a whole number >= 0 (epoch ms), got #{inspect(run_at_ms)}"}}

  @doc "Moves a job that has not started to run `delay_ms` from now (server clock): `{:ok, run_at_ms}`."
  def reschedule_in(conn, queue, job_id, delay_ms) when is_integer(delay_ms) and delay_ms >= 0,
    do: reschedule(conn, queue, job_id, "in", delay_ms)

  def reschedule_in(_, _, _, delay_ms),
    do: {:error, {:input, "delay_ms must be a whole number >= 0, got #{inspect(delay_ms)}"}}

  defp reschedule(conn, queue, job_id, mode, value) do
    with :ok <- EchoMQ.Ids.check(job_id),
         {:ok, at} <- job_verb(conn, queue, "reschedule", job_id, [job_id, mode, Integer.to_string(value)]) do
      {:ok, Connector.int(at)}
    end
  end

  @doc "Gives a job that has not started a new priority (lower runs first; 0: none)."
  def reprioritize(conn, queue, job_id, priority)
      when is_integer(priority) and priority >= 0 and priority <= 2_097_152 do
    with :ok <- EchoMQ.Ids.check(job_id) do
      job_verb(conn, queue, "reprioritize", job_id, [job_id, Integer.to_string(priority)]) |> done()
    end
  end

  def reprioritize(_, _, _, priority),
    do: {:error, {:input, "priority must be a whole number from 0 to 2097152, got #{inspect(priority)}"}}

  @doc "Replaces the data (JSON text) of a job that has not started."
  def update(conn, queue, job_id, payload) do
    with :ok <- EchoMQ.Ids.check(job_id),
         :ok <- Jobs.check_json(payload, "data") do
      job_verb(conn, queue, "update_data", job_id, [job_id, payload]) |> done()
    end
  end

  @doc "Deletes a job that is not running: `{:ok, true}` when it existed."
  def remove(conn, queue, job_id) do
    with :ok <- EchoMQ.Ids.check(job_id),
         {:ok, n} <- job_verb(conn, queue, "remove", job_id, [job_id]) do
      {:ok, Connector.int(n) == 1}
    end
  end

  # A verb on one job: the script's reply, and its errors in the runtime's shapes.
  defp job_verb(conn, queue, verb, job_id, argv) do
    case Jobs.run(conn, queue, verb, job_id, [Keyspace.prefix(queue) | argv]) do
      {:ok, reply} -> {:ok, reply}
      {:error, {:server, "EMQNOJOB" <> _}} -> {:error, :no_job}
      {:error, {:server, "EMQSTATE " <> why}} -> {:error, {:state, why}}
      {:error, {:server, "EMQINPUT " <> why}} -> {:error, {:input, why}}
      {:error, {:server, "EMQTOOBIG" <> _}} -> {:error, :too_big}
      other -> other
    end
  end

  # A verb whose reply is a bare 1: done.
  defp done({:ok, _}), do: :ok
  defp done(err), do: err

  # ── ended jobs ─────────────────────────────────────────────────────────────

  @doc """
  Returns a dead, cancelled or completed job to pending with its attempts reset (its error kept
  as `lastError`): `:ok`, `{:error, :no_job}`, `{:error, {:state, why}}` (it has not ended) or
  `{:error, {:data, why}}` (a malformed number on its row).
  """
  def retry(conn, queue, job_id) do
    with :ok <- EchoMQ.Ids.check(job_id),
         {:ok, [status | _]} <- Jobs.run(conn, queue, "retry", nil, [Keyspace.prefix(queue), job_id]) do
      case status do
        "OK" ->
          :ok

        "EMQNOJOB" ->
          {:error, :no_job}

        "EMQSTATE" ->
          {:ok, state} = Connector.command(conn, ["HGET", Keyspace.job_key(queue, job_id), "state"])
          {:error, {:state, "job #{job_id} is #{state}: only a job that ended can be retried"}}

        _ ->
          {:error,
           {:data,
            "job #{job_id} has a prio, token or max that is not a whole number: correct or remove the field, then retry it"}}
      end
    end
  end

  @doc """
  Retries every job that ended in a state before the call, oldest first: `{:ok, count}`. Jobs
  that end again while it runs are not taken twice. Options: `:state` (`"dead"`, default,
  `"cancelled"` or `"completed"`), `:batch` (ids per script call, 1..10000, default 500).
  """
  def retry_all(conn, queue, opts \\ []) do
    state = opts[:state] || "dead"
    batch = opts[:batch] || 500

    cond do
      state not in @ended ->
        {:error,
         {:input, "retry_all :state must be \"dead\", \"cancelled\" or \"completed\", got #{inspect(state)}"}}

      not (is_integer(batch) and batch in 1..10_000) ->
        {:error, {:input, "retry_all :batch must be a whole number from 1 to 10000, got #{inspect(batch)}"}}

      true ->
        set = Keyspace.queue_key(queue, state)

        # The newest end at the start bounds the run: a job that ends again later scores above it.
        case Connector.command(conn, ["ZRANGE", set, "-1", "-1", "WITHSCORES"]) do
          {:ok, [_, cutoff]} -> retry_from(conn, queue, set, cutoff, batch, 0, 0)
          {:ok, []} -> {:ok, 0}
          err -> err
        end
    end
  end

  defp retry_from(conn, queue, set, cutoff, batch, skip, retried) do
    with {:ok, ids} <-
           Connector.command(conn, ["ZRANGEBYSCORE", set, "-inf", cutoff, "LIMIT", skip, batch]) do
      if ids == [] do
        {:ok, retried}
      else
        with {:ok, statuses} <- Jobs.run(conn, queue, "retry", nil, [Keyspace.prefix(queue) | ids]) do
          ok = Enum.count(statuses, &(&1 == "OK"))
          kept = Enum.count(statuses, &(&1 in ["EMQSTATE", "EMQDATA"]))
          retry_from(conn, queue, set, cutoff, batch, skip + kept, retried + ok)
        end
      end
    end
  end

  @doc """
  Deletes up to `limit` jobs of an ended state (`"completed"`, `"dead"` or `"cancelled"`) that
  ended at least `older_than_ms` ago (0: any): `{:ok, count}`.
  """
  def clean(conn, queue, state, older_than_ms, limit)
      when state in @ended and is_integer(older_than_ms) and older_than_ms >= 0 and is_integer(limit) and
             limit >= 1 do
    with {:ok, n} <-
           Jobs.run(conn, queue, "clean", nil, [Keyspace.prefix(queue), state, older_than_ms, limit]) do
      {:ok, Connector.int(n)}
    end
  end

  def clean(_, _, state, older_than_ms, limit),
    do:
      {:error,
       {:input,
        "clean needs a state of \"completed\", \"dead\" or \"cancelled\", older_than_ms >= 0 and limit >= 1, " <>
          "got #{inspect(state)}, #{inspect(older_than_ms)}, #{inspect(limit)}"}}

  @doc """
  Deletes every waiting job, batch by batch: `{:ok, count}`; running and ended jobs stay.
  Options: `:scheduled` (true: scheduled jobs too, after the pending ones; default false),
  `:batch` (ids per script call, default 1000).
  """
  def drain(conn, queue, opts \\ []) do
    batch = opts[:batch] || 1000

    if is_integer(batch) and batch >= 1 do
      drain_from(conn, queue, batch, if(opts[:scheduled], do: "1", else: "0"), 0)
    else
      {:error, {:input, "drain :batch must be a whole number >= 1, got #{inspect(batch)}"}}
    end
  end

  defp drain_from(conn, queue, batch, scheduled, total) do
    case Jobs.run(conn, queue, "drain", nil, [Keyspace.prefix(queue), batch, scheduled]) do
      {:ok, [deleted, more | _]} ->
        total = total + Connector.int(deleted)
        if Connector.int(more) == 0, do: {:ok, total}, else: drain_from(conn, queue, batch, scheduled, total)

      {:ok, other} ->
        {:error, {:protocol, "drain replied #{inspect(other)}, not {deleted, more}"}}

      err ->
        err
    end
  end

  @states ~w(scheduled pending active completed dead cancelled waiting_children)

  @doc "How many jobs are in each state, a map by state name (pending counts every lane too)."
  def counts(conn, queue) do
    with {:ok, _} <- Jobs.hello(conn, queue),
         {:ok, lanes} <- Connector.command(conn, ["SMEMBERS", Keyspace.queue_key(queue, "lanes")]) do
      sets = Enum.map(@states, fn s -> if s == "scheduled", do: "schedule", else: s end)
      cmds = Enum.map(sets ++ Enum.map(lanes, &"g:#{&1}:pending"), &["ZCARD", Keyspace.queue_key(queue, &1)])

      case Connector.pipeline(conn, cmds) do
        replies when is_list(replies) ->
          case Enum.find(replies, &match?({:error, _}, &1)) do
            nil ->
              ns = Enum.map(replies, fn {:ok, n} -> Connector.int(n) end)
              {by_state, lane_pending} = Enum.split(ns, length(@states))
              map = Map.new(Enum.zip(@states, by_state))
              {:ok, Map.update!(map, "pending", &(&1 + Enum.sum(lane_pending)))}

            err ->
              err
          end

        err ->
          err
      end
    end
  end

  # ── waiting for an end ─────────────────────────────────────────────────────

  @doc """
  Waits until the job ends: `{:ok, result}` (completed; its decoded result, `nil` for none),
  `{:error, {:failed, message}}` (dead), `{:error, :cancelled}`, `{:error, :no_job}`, or
  `{:error, :timeout}` after `:timeout_ms` (default `:infinity`). It reads the job's row, then
  blocks on the events stream (a connection of its own) from the entry before that read, so an
  end between the two is never missed.
  """
  def wait_for(conn, queue, job_id, opts \\ []) do
    timeout = opts[:timeout_ms] || :infinity

    with :ok <- EchoMQ.Ids.check(job_id),
         :ok <- check_timeout(timeout),
         {:ok, _} <- Jobs.hello(conn, queue),
         {:ok, bconn} <- Connector.blocking(conn) do
      deadline = if timeout == :infinity, do: :infinity, else: System.monotonic_time(:millisecond) + timeout

      try do
        with {:ok, last} <- last_event_id(conn, queue) do
          wait_loop(conn, bconn, queue, job_id, last, deadline)
        end
      after
        Connector.close_blocking(bconn)
      end
    end
  end

  defp check_timeout(:infinity), do: :ok
  defp check_timeout(ms) when is_integer(ms) and ms >= 0, do: :ok

  defp check_timeout(ms),
    do:
      {:error, {:input, "wait_for :timeout_ms must be a whole number >= 0 or :infinity, got #{inspect(ms)}"}}

  defp last_event_id(conn, queue) do
    case Connector.command(conn, ["XREVRANGE", Keyspace.queue_key(queue, "events"), "+", "-", "COUNT", "1"]) do
      {:ok, [[id, _] | _]} -> {:ok, id}
      {:ok, []} -> {:ok, "0"}
      err -> err
    end
  end

  defp wait_loop(conn, bconn, queue, job_id, last, deadline) do
    case settled(conn, queue, job_id) do
      :waiting ->
        left = if deadline == :infinity, do: 1000, else: deadline - System.monotonic_time(:millisecond)

        if left <= 0 do
          {:error, :timeout}
        else
          block = min(left, 1000)
          key = Keyspace.queue_key(queue, "events")

          case Connector.command(
                 bconn,
                 ["XREAD", "COUNT", "500", "BLOCK", block, "STREAMS", key, last],
                 block + 10_000
               ) do
            # Something happened on the queue: read the row again from the newest entry seen.
            {:ok, [[_, entries]]} ->
              [newest, _] = List.last(entries)
              wait_loop(conn, bconn, queue, job_id, newest, deadline)

            # The block ran out with nothing new.
            {:ok, nothing} when nothing in [nil, []] ->
              wait_loop(conn, bconn, queue, job_id, last, deadline)

            err ->
              err
          end
        end

      done ->
        done
    end
  end

  defp settled(conn, queue, job_id) do
    case Jobs.get(conn, queue, job_id) do
      {:ok, nil} -> {:error, :no_job}
      {:ok, %{"state" => "completed"} = v} -> {:ok, v["result"]}
      {:ok, %{"state" => "dead"} = v} -> {:error, {:failed, get_in(v, ["error", "message"]) || ""}}
      {:ok, %{"state" => "cancelled"}} -> {:error, :cancelled}
      {:ok, _} -> :waiting
      err -> err
    end
  end
end
