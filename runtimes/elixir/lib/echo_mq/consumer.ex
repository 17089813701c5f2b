defmodule EchoMQ.Consumer do
  @moduledoc """
  A consumer of one queue, as a GenServer the host supervises (`start_link/1` under its own
  supervisor: EchoMQ-Elixir ships no supervision tree). It runs the beat of SPEC 25.3:
  **recover** (reap, or sweep_stalled with `recovery: :stalled`; then the heartbeat),
  **promote** (at least once a beat, at the schedule's head, on a `w s` wake), **drain** (claim
  the free slots) and **park** (XREAD BLOCK on the wake stream, on a connection of its own,
  in a process of its own so the GenServer keeps answering), with leases and fencing tokens,
  extend_lock every third of the lease, complete (batched: what finished together goes in one
  call, which claims the freed slots) and fail with the job's backoff. A wire error on any
  leg skips the rest of the beat and backs off (the degraded streak: beat, 2x, 4x … 30 s).

  Options: `:queue` (required), `:handler` (required; `fn job -> … end`), `:conn` (an
  `EchoMQ.Connector`) or `:url`, `:concurrency` (10), `:lease_ms` (30000), `:beat_ms` (1000),
  `:promote_batch` (100), `:recovery` (`:reap` | `:stalled` | `:off`), `:max_stalled` (1),
  `:recurrence` (true: the recurrence leg, `EchoMQ.Repeat.pump/3` and `EchoMQ.JobScheduler.advance/3`),
  `:backoff` (the default policy, `{:exponential, 1000, 300_000}`), `:close_timeout_ms`
  (10000), `:id`, `:notify` (a pid that gets `{:echomq_consumer, kind, job_id, info}` for
  kind `:active`, `:completed`, `:failed`, `:lost`, `:degraded`), `:name`.

  The handler gets a job map (`:id`, `:name`, `:data` decoded, `:attempts`, `:max_attempts`,
  `:token`, `:queue`, `:conn`) and returns `{:ok, result}` (stored as JSON), `:ok` (no result),
  `{:error, reason}` (a retry by backoff, dead on the last attempt) or `{:unrecoverable,
  reason}` (dead at once); a raise or exit is an `{:error, …}` with its stack.
  """
  use GenServer
  require Logger

  alias EchoMQ.{Backoff, Connector, Jobs, JSON, Keyspace}

  @max_error 2048
  @max_stack 8192

  # ── public surface ─────────────────────────────────────────────────────────

  def start_link(opts) do
    gen = if opts[:name], do: [name: opts[:name]], else: []
    GenServer.start_link(__MODULE__, opts, gen)
  end

  def child_spec(opts),
    do: %{id: opts[:id] || __MODULE__, start: {__MODULE__, :start_link, [opts]}, shutdown: 15_000}

  @doc """
  Closes gracefully: stops claiming, waits up to `:close_timeout_ms` for running handlers,
  hands back the rest (claimable at once, their attempt given back), says a last heartbeat.
  """
  def close(server, timeout \\ 30_000), do: GenServer.call(server, :close, timeout)

  @doc "How many jobs run now."
  def running(server), do: GenServer.call(server, :running)

  @doc "Stores a running job's progress (any JSON-encodable term), from its handler."
  def progress(%{conn: conn, queue: q, id: id, token: t}, value),
    do: Jobs.progress(conn, q, id, t, JSON.encode!(value))

  # ── the server ─────────────────────────────────────────────────────────────

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    queue = opts[:queue] || raise ArgumentError, "EchoMQ.Consumer needs queue: \"name\""

    handler =
      opts[:handler] || raise ArgumentError, "EchoMQ.Consumer needs handler: fn job -> {:ok, result} end"

    conn =
      case opts[:conn] do
        %Connector{} = c -> c
        nil -> Connector.connect!(Keyword.take(opts, [:url, :host, :port, :scripts_dir]))
      end

    with {:ok, _} <- Jobs.hello(conn, queue),
         {:ok, bconn} <- Connector.blocking(conn) do
      s = %{
        conn: conn,
        bconn: bconn,
        queue: queue,
        prefix: Keyspace.prefix(queue),
        handler: handler,
        id: opts[:id] || "ex-" <> String.slice(Jobs.new_id(), 3, 20),
        concurrency: opts[:concurrency] || 10,
        lease_ms: opts[:lease_ms] || 30_000,
        beat_ms: opts[:beat_ms] || 1_000,
        batch: opts[:promote_batch] || 100,
        recovery: opts[:recovery] || :reap,
        recurrence: Keyword.get(opts, :recurrence, true),
        max_stalled: opts[:max_stalled] || 1,
        backoff: opts[:backoff] || Backoff.default(),
        close_timeout: opts[:close_timeout_ms] || 10_000,
        notify: opts[:notify],
        held: %{},
        acks: [],
        flush_armed: false,
        wake_id: nil,
        short: false,
        schedule_moved: false,
        next_due_at: nil,
        limited_until: nil,
        last_promote: nil,
        last_recover: nil,
        parker: nil,
        timer: nil,
        streak: 0,
        closing: nil,
        done: false
      }

      Process.send_after(self(), :extend, div(s.lease_ms, 3))
      send(self(), :tick)
      {:ok, s}
    else
      {:error, reason} -> {:stop, reason}
    end
  end

  @impl true
  def handle_call(:running, _from, s), do: {:reply, map_size(s.held), s}

  def handle_call(:close, from, s) do
    s = %{s | closing: from}

    if map_size(s.held) == 0,
      do: finish(s),
      else:
        (
          Process.send_after(self(), :close_deadline, s.close_timeout)
          {:noreply, s}
        )
  end

  @impl true
  def handle_info(:tick, %{closing: nil} = s) do
    s = cancel_timer(%{s | timer: nil})

    case beat(s) do
      {:ok, s} -> {:noreply, wait(%{s | streak: 0})}
      {:degraded, s, leg, reason} -> {:noreply, degrade(s, leg, reason)}
    end
  end

  def handle_info(:tick, s), do: {:noreply, s}

  # The park ended: any entry read is new work (a `w s` entry: the schedule moved, promote now).
  def handle_info({:parked, pid, result}, %{parker: pid} = s) do
    s = %{s | parker: nil}

    s =
      case result do
        {:ok, [[_stream, entries]]} when entries != [] ->
          [last_id, _] = List.last(entries)
          moved = Enum.any?(entries, fn [_, fields] -> Jobs.pairs(fields)["w"] == "s" end)
          %{s | wake_id: last_id, short: false, schedule_moved: s.schedule_moved or moved}

        _ ->
          s
      end

    send(self(), :tick)
    {:noreply, s}
  end

  def handle_info({:parked, _, _}, s), do: {:noreply, s}

  # A handler ended: its outcome joins the acknowledgements sent together (`:flush` queues
  # after every outcome already in the mailbox, so what finished together is one call).
  def handle_info({:DOWN, ref, :process, _pid, reason}, s) do
    case Enum.find(s.held, fn {_, j} -> j.ref == ref end) do
      {id, _job} ->
        outcome =
          case reason do
            {:shutdown, {:echomq_outcome, o}} -> o
            :killed -> {:error, "the handler was killed", ""}
            other -> {:error, "the handler exited: #{inspect(other)}", ""}
          end

        s = put_in(s.held[id].outcome, outcome)
        s = %{s | acks: [id | s.acks]}

        if s.flush_armed,
          do: {:noreply, s},
          else:
            (
              send(self(), :flush)
              {:noreply, %{s | flush_armed: true}}
            )

      nil ->
        {:noreply, s}
    end
  end

  def handle_info(:flush, s) do
    s = flush(%{s | flush_armed: false})
    if s.closing && map_size(s.held) == 0, do: finish(s), else: {:noreply, s}
  end

  def handle_info(:extend, s) do
    s = extend(s)
    unless s.done, do: Process.send_after(self(), :extend, div(s.lease_ms, 3))
    {:noreply, s}
  end

  def handle_info({:job_timeout, id, token}, s) do
    case s.held[id] do
      %{token: ^token, outcome: nil} = j ->
        Process.demonitor(j.ref, [:flush])
        Process.exit(j.pid, :kill)
        s = put_in(s.held[id].outcome, {:timeout, "the attempt ran past its timeout", ""})
        {:noreply, flush(%{s | acks: [id | s.acks]})}

      _ ->
        {:noreply, s}
    end
  end

  def handle_info(:close_deadline, %{closing: from} = s) when from != nil, do: finish(s)
  # The parker died without answering (its connection went): park again from the next tick.
  def handle_info({:EXIT, pid, _}, %{parker: pid} = s) when pid != nil do
    send(self(), :tick)
    {:noreply, %{s | parker: nil}}
  end

  def handle_info({:EXIT, _, :normal}, s), do: {:noreply, s}
  def handle_info(_, s), do: {:noreply, s}

  @impl true
  def terminate(_reason, %{done: false} = s), do: handback_all(s)
  def terminate(_, _), do: :ok

  # ── the beat ───────────────────────────────────────────────────────────────

  defp beat(s) do
    with {:ok, s} <- recover(s),
         {:ok, s, promoted} <- promote(s) do
      drain(s, promoted)
    end
  end

  defp recover(s) do
    now = mono()

    if s.last_recover && now - s.last_recover < s.beat_ms do
      {:ok, s}
    else
      pass =
        case s.recovery do
          :reap ->
            Jobs.run(s.conn, s.queue, "reap", nil, [s.prefix, s.batch, s.beat_ms])

          :stalled ->
            Jobs.run(s.conn, s.queue, "sweep_stalled", nil, [s.prefix, s.max_stalled, s.batch, s.beat_ms])

          :off ->
            {:ok, nil}
        end

      with {:ok, _} <- pass,
           {:ok, _} <- Jobs.run(s.conn, s.queue, "heartbeat", nil, [s.prefix, s.id, info(s)]),
           {:ok, s} <- recurrence(s) do
        {:ok, %{s | last_recover: now}}
      else
        {:error, reason} -> {:degraded, s, :recover, reason}
      end
    end
  end

  # The recurrence leg (SPEC 15): the cadences' pump (the backstop for a slot promote did not
  # release) and the scheduler hand-off and lookahead top-up, once a beat and at once when
  # promote released occurrences it could not follow (`handoffs`).
  defp recurrence(%{recurrence: false} = s), do: {:ok, s}

  defp recurrence(s) do
    with {:ok, _} <- EchoMQ.Repeat.pump(s.conn, s.queue, s.batch),
         {:ok, _} <- EchoMQ.JobScheduler.advance(s.conn, s.queue, s.batch) do
      {:ok, s}
    end
  end

  defp info(s) do
    {:ok, host} = :inet.gethostname()

    JSON.encode!(%{
      "host" => List.to_string(host),
      "pid" => String.to_integer(System.pid()),
      "concurrency" => s.concurrency,
      "running" => map_size(s.held),
      "beatMs" => s.beat_ms,
      "runtime" => "elixir",
      # The versions it speaks: migrate steps a queue up only when every live consumer does.
      "protocols" => Tuple.to_list(Jobs.versions())
    })
  end

  defp promote(s) do
    now = mono()
    due = s.next_due_at != nil and now >= s.next_due_at

    if not s.schedule_moved and not due and s.last_promote != nil and now - s.last_promote < s.beat_ms do
      {:ok, s, false}
    else
      # The ms this consumer lived since its previous promote (SPEC 2.1): a server clock that
      # ran further ahead was stepped.
      elapsed = if s.last_promote, do: [max(now - s.last_promote, 0)], else: []
      s = %{s | schedule_moved: false, last_promote: now}

      case Jobs.promote(s.conn, s.queue, s.batch, next: true, elapsed_ms: elapsed) do
        {:ok, %{count: count, now_ms: server_now, next_due_ms: next, handoffs: handoffs}} ->
          s = if count >= s.batch, do: %{s | next_due_at: mono()}, else: learn_head(s, server_now, next)
          # Released occurrences promote could not follow (cron): hand them off now.
          s = if handoffs > 0, do: %{s | last_recover: nil}, else: s
          {:ok, if(count > 0, do: %{s | short: false}, else: s), true}

        {:error, reason} ->
          {:degraded, s, :promote, reason}
      end
    end
  end

  defp drain(s, promoted) do
    reopened = s.limited_until != nil and mono() >= s.limited_until
    free = free(s)

    if s.closing != nil or free <= 0 or (s.short and not promoted and not reopened) do
      {:ok, s}
    else
      case Jobs.run(s.conn, s.queue, "claim", nil, [s.prefix, free, s.lease_ms, s.id]) do
        {:ok, [jobs | rest]} -> {:ok, started(s, jobs, rest)}
        {:error, reason} -> {:degraded, s, :drain, reason}
      end
    end
  end

  defp free(s), do: s.concurrency - map_size(s.held)

  # claim's (and complete's) tail: wake_id wait_ms now_ms next_due_ms [timeouts].
  defp started(s, flat, [wake_id, wait_ms, server_now, next_due | more]) do
    s = %{s | short: wake_id != "", wake_id: if(wake_id != "", do: wake_id, else: s.wake_id)}
    s = learn_head(s, Connector.int(server_now), Connector.int(next_due))
    wait_ms = Connector.int(wait_ms)
    s = %{s | limited_until: if(wait_ms >= 0, do: mono() + wait_ms, else: nil)}

    timeouts =
      case more do
        [t | _] when is_list(t) ->
          t |> Enum.chunk_every(2) |> Map.new(fn [id, ms] -> {id, String.to_integer(ms)} end)

        _ ->
          %{}
      end

    flat |> Enum.chunk_every(7) |> Enum.reduce(s, &start_job(&2, &1, timeouts))
  end

  defp start_job(s, [id, token, attempts, max, payload, name, backoff], timeouts) do
    job = %{
      id: id,
      token: token,
      name: name,
      attempts: Connector.int(attempts),
      max_attempts: Connector.int(max),
      queue: s.queue,
      conn: s.conn
    }

    # Bad data never stops the consumer: a payload or backoff it cannot use fails that job
    # unrecoverably (dead) without a handler run.
    {data, policy, bad} =
      with {:ok, data} <- JSON.decode(payload),
           {:ok, policy} <- policy(backoff) do
        {data, policy, nil}
      else
        {:error, why} -> {nil, nil, "job #{id} has a payload or backoff this consumer cannot use (#{why})"}
      end

    job = Map.put(job, :data, data)
    handler = s.handler
    parent = self()

    {pid, ref} =
      spawn_monitor(fn ->
        outcome = if bad, do: {:unrecoverable, bad, ""}, else: run_handler(handler, job)
        _ = parent
        exit({:shutdown, {:echomq_outcome, outcome}})
      end)

    if ms = timeouts[id], do: Process.send_after(self(), {:job_timeout, id, token}, ms)
    notify(s, :active, id, %{attempt: job.attempts})
    put_in(s.held[id], %{job: job, token: token, pid: pid, ref: ref, policy: policy, outcome: nil})
  end

  defp policy(""), do: {:ok, nil}

  defp policy(text) do
    with {:ok, map} <- JSON.decode(text), do: Backoff.from_map(map)
  end

  defp run_handler(handler, job) do
    case handler.(job) do
      {:ok, result} ->
        {:ok, JSON.encode!(result)}

      :ok ->
        {:ok, ""}

      {:error, reason} ->
        {:error, text(reason), ""}

      {:unrecoverable, reason} ->
        {:unrecoverable, text(reason), ""}

      other ->
        {:error, "the handler returned #{inspect(other)}, not {:ok, result} | :ok | {:error, reason}", ""}
    end
  rescue
    e -> {:error, Exception.message(e), Exception.format_stacktrace(__STACKTRACE__)}
  catch
    kind, reason -> {:error, "#{kind}: #{inspect(reason)}", Exception.format_stacktrace(__STACKTRACE__)}
  end

  defp text(r) when is_binary(r), do: r
  defp text(r), do: inspect(r)

  # The schedule's head as a reply saw it (server instants: only their difference is used).
  defp learn_head(s, _now, next) when next < 0, do: %{s | next_due_at: nil}
  defp learn_head(s, now, next), do: %{s | next_due_at: mono() + max(next - now, 0)}

  # Park after a short claim or with every slot busy (a `w s` then makes it promote on time);
  # with free slots after a full claim it only waits for the next tick.
  defp wait(s) do
    now = mono()
    beat_left = if s.last_recover, do: s.beat_ms - (now - s.last_recover), else: 0

    wait =
      [beat_left, s.next_due_at && s.next_due_at - now, s.limited_until && s.limited_until - now]
      |> Enum.reject(&is_nil/1)
      |> Enum.min()
      |> max(0)

    cond do
      s.closing != nil or s.parker != nil ->
        s

      wait == 0 ->
        send(self(), :tick)
        s

      (s.short or free(s) <= 0) and s.wake_id != nil ->
        park(s, wait)

      true ->
        %{s | timer: Process.send_after(self(), :tick, wait)}
    end
  end

  defp park(s, ms) do
    me = self()
    b = s.bconn
    key = s.prefix <> "wake"
    wake_id = s.wake_id

    pid =
      spawn_link(fn ->
        r = Connector.command(b, ["XREAD", "COUNT", "100", "BLOCK", ms, "STREAMS", key, wake_id], ms + 10_000)
        send(me, {:parked, self(), r})
      end)

    %{s | parker: pid}
  end

  defp cancel_timer(%{timer: nil} = s), do: s

  defp cancel_timer(s) do
    Process.cancel_timer(s.timer)
    %{s | timer: nil}
  end

  defp degrade(s, leg, reason) do
    streak = s.streak + 1
    pause = min(s.beat_ms * Bitwise.bsl(1, min(streak - 1, 10)), 30_000)

    Logger.warning(
      "EchoMQ.Consumer #{s.queue}: #{leg} failed (#{inspect(reason)}); degraded x#{streak}, next beat in #{pause} ms"
    )

    notify(s, :degraded, nil, %{leg: leg, reason: reason, streak: streak})
    %{s | streak: streak, timer: Process.send_after(self(), :tick, pause)}
  end

  # ── outcomes ───────────────────────────────────────────────────────────────

  defp flush(%{acks: []} = s), do: s

  defp flush(s) do
    ids = Enum.reverse(s.acks)
    s = %{s | acks: []}
    {oks, others} = Enum.split_with(ids, fn id -> match?({:ok, _}, s.held[id] && s.held[id].outcome) end)
    s = Enum.reduce(others, s, &fail_one(&2, &1))
    complete(s, Enum.filter(oks, &Map.has_key?(s.held, &1)))
  end

  defp complete(s, []), do: s

  defp complete(s, ids) do
    claim_n = if s.closing, do: 0, else: max(free(s) + length(ids), 0)

    triples =
      Enum.flat_map(ids, fn id ->
        j = s.held[id]
        {:ok, r} = j.outcome
        [id, j.token, r]
      end)

    case Jobs.run(s.conn, s.queue, "complete", nil, [s.prefix, s.lease_ms, claim_n] ++ triples ++ [s.id]) do
      {:ok, [statuses, jobs | rest]} ->
        s =
          Enum.zip(ids, statuses)
          |> Enum.reduce(s, fn
            {id, "OK"}, s ->
              j = s.held[id]
              {:ok, r} = j.outcome
              notify(s, :completed, id, %{attempt: j.job.attempts, result: r})
              %{s | held: Map.delete(s.held, id)}

            {id, _lease}, s ->
              lose(s, id)
          end)

        if s.closing, do: s, else: started(s, jobs, rest)

      {:error, reason} ->
        # Not stored: kept held (its lease is extended) and sent again at the next tick.
        Logger.warning("EchoMQ.Consumer #{s.queue}: complete failed (#{inspect(reason)}); retrying")
        Process.send_after(self(), :flush, 100)
        %{s | acks: ids ++ s.acks, flush_armed: true}
    end
  end

  defp fail_one(s, id) do
    case s.held[id] do
      nil ->
        s

      j ->
        {kind, message, stack} = j.outcome
        attempts = j.job.attempts

        delay =
          cond do
            kind == :unrecoverable or j[:cancel] -> -1
            attempts >= j.job.max_attempts -> 0
            true -> Backoff.delay_ms(j.policy || s.backoff, attempts)
          end

        reason = if kind == :timeout, do: ["timeout"], else: []
        argv = [s.prefix, id, j.token, clip(message, @max_error), clip(stack, @max_stack), delay] ++ reason

        case Jobs.run(s.conn, s.queue, "fail", id, argv) do
          {:ok, outcome} ->
            notify(s, :failed, id, %{attempt: attempts, outcome: outcome, error: message})
            %{s | held: Map.delete(s.held, id)}

          {:error, {:server, "EMQLEASE" <> _}} ->
            lose(s, id)

          {:error, {:server, "EMQNOJOB" <> _}} ->
            lose(s, id)

          {:error, reason} ->
            Logger.warning("EchoMQ.Consumer #{s.queue}: fail failed (#{inspect(reason)}); retrying")
            Process.send_after(self(), :flush, 100)
            %{s | acks: [id | s.acks], flush_armed: true}
        end
    end
  end

  defp lose(s, id) do
    case s.held[id] do
      nil ->
        s

      j ->
        if j.outcome == nil, do: Process.exit(j.pid, :kill)
        Process.demonitor(j.ref, [:flush])
        notify(s, :lost, id, %{attempt: j.job.attempts})
        %{s | held: Map.delete(s.held, id)}
    end
  end

  defp clip(text, limit) when byte_size(text) <= limit, do: text

  defp clip(text, limit) do
    # Cut at a character boundary, ended with an ellipsis (SPEC 5.1).
    cut = binary_part(text, 0, limit - 3)
    cut = String.chunk(cut, :valid) |> Enum.take_while(&String.valid?/1) |> Enum.join()
    cut <> "…"
  end

  # ── extension ──────────────────────────────────────────────────────────────

  defp extend(s) do
    live = for {id, j} <- s.held, j.outcome == nil, do: {id, j.token}

    if live == [] do
      s
    else
      argv = [s.prefix, s.lease_ms | Enum.flat_map(live, fn {id, t} -> [id, t] end)]

      case Jobs.run(s.conn, s.queue, "extend_lock", nil, argv) do
        {:ok, statuses} ->
          Enum.zip(live, statuses)
          |> Enum.reduce(s, fn
            {{_id, _}, "ok"}, s ->
              s

            # A cancel was requested: stop the handler; its fail (delay -1) ends it cancelled.
            {{id, _}, "cancel"}, s ->
              j = s.held[id]
              Process.demonitor(j.ref, [:flush])
              Process.exit(j.pid, :kill)
              s = put_in(s.held[id], %{j | outcome: {:error, "cancelled", ""}} |> Map.put(:cancel, true))
              flush(%{s | acks: [id | s.acks]})

            {{id, _}, "lost"}, s ->
              lose(s, id)
          end)

        {:error, reason} ->
          Logger.warning("EchoMQ.Consumer #{s.queue}: extend_lock failed (#{inspect(reason)})")
          s
      end
    end
  end

  # ── close ──────────────────────────────────────────────────────────────────

  defp finish(s) do
    s = flush(s)
    handback_all(s)
    GenServer.reply(s.closing, :ok)
    {:stop, :normal, %{s | done: true, held: %{}}}
  end

  defp handback_all(s) do
    unfinished = for {id, j} <- s.held, do: {id, j}

    for {_, j} <- unfinished do
      Process.demonitor(j.ref, [:flush])
      Process.exit(j.pid, :kill)
    end

    if unfinished != [] do
      pairs = Enum.flat_map(unfinished, fn {id, j} -> [id, j.token] end)
      _ = Jobs.run(s.conn, s.queue, "handback", nil, [s.prefix | pairs])
    end

    _ = Jobs.run(s.conn, s.queue, "heartbeat", nil, [s.prefix, s.id, ""])
    if s.parker, do: Process.exit(s.parker, :kill)
    Connector.close_blocking(s.bconn)
    :ok
  end

  defp notify(%{notify: nil}, _, _, _), do: :ok
  defp notify(%{notify: pid}, kind, id, info), do: send(pid, {:echomq_consumer, kind, id, info})

  defp mono, do: System.monotonic_time(:millisecond)
end
