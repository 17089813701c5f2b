defmodule EchoMQ.JobScheduler do
  @moduledoc """
  Recurring jobs (SPEC 15): a scheduler repeats by `%{every: ms}` or a cron `%{pattern: "…"}`
  (the subset `EchoMQ.Cron` reads, UTC), with optional `:immediately`, `:start_date`,
  `:end_date` (epoch ms) and `:limit`; each occurrence is a delayed job made by the shared
  scheduler scripts (addJobScheduler, getJobScheduler, updateJobScheduler, removeJobScheduler)
  under the same keys every runtime uses, so a scheduler upserted here is the same record a
  TypeScript one upserts with the same options (the repeat options stored as the same
  canonical JSON text).

  `every` and `immediately` occurrences are handed off by promote itself (in Lua); a cron
  scheduler carries a lookahead of 16 instants computed here, which promote walks; the
  hand-off of what promote cannot follow, and topping the lookahead up, is `advance/3`, which
  the Elixir consumer runs in its beat (as the TypeScript one does).
  """

  alias EchoMQ.{Connector, Jobs, JSON, Keyspace}

  @ahead 16
  @tries 10

  @doc """
  Creates or changes the scheduler `scheduler_id`: `{:ok, %{status:, next_run_at:, job_id:}}`
  with status `:created`, `:replaced`, `:updated` (same repeat options: the waiting occurrence
  keeps its id and instant) or `:ended`. `opts`: `:priority`, `:group`, `:attempts`, `:backoff`.
  """
  def upsert(conn, queue_name, scheduler_id, repeat_opts, job_name, job_data \\ %{}, opts \\ []) do
    with :ok <- Keyspace.check_name("scheduler id", scheduler_id),
         {:ok, stored} <- canonical(repeat_opts),
         {:ok, template} <- template(job_name || scheduler_id, job_data, opts) do
      json = canonical_json(stored)
      attempt(conn, queue_name, scheduler_id, stored, json, template, @tries)
    end
  end

  defp attempt(_, _, id, _, _, _, 0),
    do: {:error, {:state, "scheduler #{id} kept changing while it was upserted; try again"}}

  defp attempt(conn, queue, id, stored, json, template, tries) do
    with {:ok, read} <- read(conn, queue, id) do
      count = String.to_integer(read.fields["count"] || "0")

      {count, next, ended} =
        if read.fields["repeat"] != json do
          count = if read.waiting, do: count - 1, else: count

          case calculate_next(stored, read.now, count) do
            nil -> {count, nil, end_reason(stored, count)}
            n -> {count, n, ""}
          end
        else
          {count, nil, ""}
        end

      ahead = if next, do: lookahead(stored, next, count + 1), else: ""

      argv =
        [Keyspace.prefix(queue), id, json | template] ++
          [next || "", read.fields["job"] || "", count, ended, ahead]

      case Jobs.run(conn, queue, "addJobScheduler", nil, argv) do
        {:ok, ["stale" | _]} ->
          attempt(conn, queue, id, stored, json, template, tries - 1)

        {:ok, [status, at, job]} ->
          {:ok,
           %{
             status: String.to_atom(status),
             next_run_at: (at != "" && String.to_integer(at)) || nil,
             job_id: if(job == "" or status == "ended", do: nil, else: job)
           }}

        {:error, {:server, "EMQINPUT " <> why}} ->
          {:error, {:input, why}}

        err ->
          err
      end
    end
  end

  @doc "The scheduler as a map, or `{:ok, nil}` when there is none with that id."
  def get(conn, queue_name, scheduler_id, _opts \\ []) do
    with :ok <- Keyspace.check_name("scheduler id", scheduler_id),
         {:ok, read} <- read(conn, queue_name, scheduler_id) do
      if read.fields["repeat"], do: {:ok, view(scheduler_id, read.score, read.fields)}, else: {:ok, nil}
    end
  end

  @doc "Schedulers by upcoming run, soonest first (ended last): `opts` `:start`, `:end` ranks."
  def list(conn, queue_name, opts \\ []) do
    key = Keyspace.queue_key(queue_name, "schedulers")

    with {:ok, flat} <-
           Connector.command(conn, ["ZRANGE", key, opts[:start] || 0, opts[:end] || -1, "WITHSCORES"]) do
      pairs = Enum.chunk_every(flat, 2)

      rows =
        if pairs == [],
          do: [],
          else:
            Connector.pipeline(
              conn,
              Enum.map(pairs, fn [id, _] ->
                ["HGETALL", Keyspace.queue_key(queue_name, "scheduler:" <> id)]
              end)
            )

      {:ok,
       for {[id, score], {:ok, f}} <- Enum.zip(pairs, rows),
           f != [],
           fields = Jobs.pairs(f),
           fields["repeat"] do
         view(id, score, fields)
       end}
    end
  end

  @doc "How many schedulers the queue has (ended ones included)."
  def count(conn, queue_name, _opts \\ []) do
    with {:ok, n} <- Connector.command(conn, ["ZCARD", Keyspace.queue_key(queue_name, "schedulers")]),
         do: {:ok, Connector.int(n)}
  end

  @doc "Removes the scheduler and its waiting occurrence: `{:ok, true}` when it existed."
  def remove(conn, queue_name, scheduler_id, _opts \\ []) do
    with :ok <- Keyspace.check_name("scheduler id", scheduler_id),
         {:ok, r} <-
           Jobs.run(conn, queue_name, "removeJobScheduler", nil, [Keyspace.prefix(queue_name), scheduler_id]) do
      {:ok, Connector.int(r) == 1}
    end
  end

  @doc "`remove/4` by the key a scheduler is listed under (its id)."
  def remove_by_key(conn, queue_name, key, opts \\ []), do: remove(conn, queue_name, key, opts)

  @doc """
  The next run after `reference_time` (epoch ms): `reference_time` for `immediately`,
  `reference_time + every`, or the cron pattern's next instant; `nil` when there is none.

      iex> EchoMQ.JobScheduler.calculate_next_millis(%{every: 60_000}, 1_000)
      61000
      iex> EchoMQ.JobScheduler.calculate_next_millis(%{pattern: "0 9 * * *"}, 1_700_000_000_000)
      1700038800000
  """
  def calculate_next_millis(repeat_opts, reference_time \\ System.system_time(:millisecond))

  def calculate_next_millis(%{immediately: true}, reference_time), do: reference_time

  def calculate_next_millis(%{every: every}, reference_time) when is_integer(every),
    do: reference_time + every

  def calculate_next_millis(%{pattern: pattern}, reference_time) do
    case EchoMQ.Cron.next(pattern, reference_time) do
      {:ok, t} -> t
      {:error, {:cron, why}} -> raise ArgumentError, "EchoMQ.JobScheduler: #{why}"
    end
  end

  @doc """
  The hand-off (the recurrence leg a consumer runs in its beat, SPEC 15): makes the next
  occurrence of every scheduler whose occurrence was released without one (at most `batch`),
  or ends it when its schedule is over, and tops up the lookahead of cron schedulers that run
  low. A scheduler whose options this runtime does not read (a cron dialect beyond
  `EchoMQ.Cron`) is skipped, left for a runtime that does: ending it would end it for everyone.
  `{:ok, %{made: ids, ended: ids, skipped: ids}}`.
  """
  def advance(conn, queue_name, batch \\ 100) do
    p = Keyspace.prefix(queue_name)

    with {:ok, [now, _next_due, due, low | _]} <-
           Jobs.run(conn, queue_name, "getJobScheduler", nil, [p, "due", batch]) do
      now = Connector.int(now)

      out =
        due
        |> Enum.chunk_every(5)
        |> Enum.reduce(%{made: [], ended: [], skipped: []}, fn [id, job, at, count, repeat], out ->
          count = String.to_integer(count)

          case stored(repeat) do
            {:ok, r} ->
              next = next_occurrence(r, String.to_integer(at), count, now)

              {ended, ahead} =
                if next, do: {"", lookahead(r, next, count + 1)}, else: {end_reason(r, count), ""}

              case Jobs.run(conn, queue_name, "updateJobScheduler", nil, [
                     p,
                     id,
                     job,
                     next || "",
                     ended,
                     ahead
                   ]) do
                {:ok, ["created", _, made | _]} -> %{out | made: [made | out.made]}
                {:ok, ["ended" | _]} -> %{out | ended: [id | out.ended]}
                _ -> out
              end

            :error ->
              %{out | skipped: [id | out.skipped]}
          end
        end)

      out =
        low
        |> Enum.chunk_every(6)
        |> Enum.reduce(out, fn [id, job, last, count, repeat, left], out ->
          case stored(repeat) do
            {:ok, r} ->
              left = String.to_integer(left)
              more = lookahead(r, String.to_integer(last), String.to_integer(count) + left, @ahead - left)
              _ = Jobs.run(conn, queue_name, "updateJobScheduler", nil, [p, id, job, "more", "", more])
              out

            :error ->
              %{out | skipped: [id | out.skipped]}
          end
        end)

      {:ok, out}
    end
  end

  # A record's repeat JSON read back into options; :error for what this runtime cannot compute.
  defp stored(json) do
    keys = %{
      "every" => :every,
      "pattern" => :pattern,
      "tz" => :tz,
      "immediately" => :immediately,
      "startDate" => :start_date,
      "endDate" => :end_date,
      "limit" => :limit
    }

    with {:ok, %{} = m} <- JSON.decode(json),
         r = for({k, v} <- m, Map.has_key?(keys, k), into: %{}, do: {keys[k], v}),
         {:ok, r} <- canonical(r) do
      {:ok, r}
    else
      _ -> :error
    end
  end

  # As TypeScript's nextOccurrence: the next slot after prev; a passed slot still runs when the
  # one after it has not passed; two or more missed: the first slot after now (no burst).
  defp next_occurrence(r, prev, count, now) do
    next = calculate_next(r, prev, count)

    cond do
      next == nil or next >= now -> next
      (after_next = calculate_next(r, next, count + 1)) == nil or after_next > now -> next
      r[:every] -> calculate_next(r, prev + div(now - prev, r[:every]) * r[:every], count)
      true -> calculate_next(r, now, count)
    end
  end

  # ── internals ──────────────────────────────────────────────────────────────

  # As the TypeScript runtime's calculateNextMillis(opts, reference, count).
  defp calculate_next(r, ref, count) do
    cond do
      r[:limit] && count >= r[:limit] ->
        nil

      true ->
        start = r[:start_date]

        next =
          cond do
            r[:immediately] && count == 0 ->
              if start && start > ref, do: start, else: ref

            r[:every] ->
              if start && start > ref, do: start, else: ref + r[:every]

            r[:pattern] ->
              after_ms = if start, do: max(ref, start - 1), else: ref
              {:ok, t} = EchoMQ.Cron.next(r[:pattern], after_ms)
              t

            true ->
              nil
          end

        if next == nil or (r[:end_date] && next > r[:end_date]), do: nil, else: next
    end
  end

  defp lookahead(r, from, made, n \\ @ahead)

  defp lookahead(%{pattern: _} = r, from, made, n) do
    Stream.unfold({from, made}, fn {prev, count} ->
      case calculate_next(r, prev, count) do
        n when is_integer(n) and n > prev -> {n, {n, count + 1}}
        _ -> nil
      end
    end)
    |> Enum.take(n)
    |> Enum.join(" ")
  end

  defp lookahead(_, _, _, _), do: ""

  defp end_reason(r, count) do
    cond do
      r[:limit] && count >= r[:limit] -> "limit"
      r[:end_date] -> "endDate"
      true -> "done"
    end
  end

  defp canonical(r) when is_map(r) do
    known = [:every, :pattern, :tz, :immediately, :start_date, :end_date, :limit]

    cond do
      (extra = Map.keys(r) -- known) != [] ->
        {:error,
         {:input,
          "unknown repeat options #{inspect(extra)}: give every, pattern, immediately, start_date, end_date, limit"}}

      r[:tz] not in [nil, "UTC", "Etc/UTC"] ->
        {:error, {:cron, "time zone #{inspect(r[:tz])}: this runtime reads cron in UTC only"}}

      r[:every] != nil and (not is_integer(r[:every]) or r[:every] < 1) ->
        {:error, {:input, "every must be a whole number of ms >= 1, got #{inspect(r[:every])}"}}

      r[:every] != nil and r[:pattern] != nil ->
        {:error, {:input, "give every or pattern, not both"}}

      r[:every] == nil and r[:pattern] == nil and r[:immediately] != true ->
        {:error, {:input, "give every: ms, pattern: \"cron\" or immediately: true"}}

      is_binary(r[:pattern]) and match?({:error, _}, EchoMQ.Cron.parse(r[:pattern])) ->
        EchoMQ.Cron.parse(r[:pattern])

      true ->
        {:ok, r}
    end
  end

  defp canonical(r), do: {:error, {:input, "repeat options must be a map, got #{inspect(r)}"}}

  # The same text TypeScript's JSON.stringify(canonical(repeat)) writes: keys in its order.
  defp canonical_json(r) do
    pairs =
      [
        every: "every",
        pattern: "pattern",
        tz: "tz",
        immediately: "immediately",
        start_date: "startDate",
        end_date: "endDate",
        limit: "limit"
      ]
      |> Enum.filter(fn {k, _} -> r[k] != nil and (k != :immediately or r[k] == true) end)
      |> Enum.map(fn {k, name} -> JSON.encode!(name) <> ":" <> JSON.encode!(r[k]) end)

    "{" <> Enum.join(pairs, ",") <> "}"
  end

  # name data prio group max backoff, as addJobScheduler takes them ('' = absent).
  defp template(name, data, opts) do
    with {:ok, prio} <- whole(opts[:priority] || 0, 0, 2_097_152, "priority") do
      backoff = if opts[:backoff], do: JSON.encode!(EchoMQ.Backoff.to_map(opts[:backoff])), else: ""
      max = if opts[:attempts], do: Integer.to_string(opts[:attempts]), else: ""
      {:ok, [to_string(name), JSON.encode!(data), prio, opts[:group] || "", max, backoff]}
    end
  end

  defp whole(n, lo, hi, _) when is_integer(n) and n >= lo and n <= hi, do: {:ok, Integer.to_string(n)}

  defp whole(n, lo, hi, what),
    do: {:error, {:input, "#{what} must be a whole number from #{lo} to #{hi}, got #{inspect(n)}"}}

  defp read(conn, queue, id) do
    case Jobs.run(conn, queue, "getJobScheduler", nil, [Keyspace.prefix(queue), "one", id]) do
      {:ok, [now, score, fields, job_state, waiting | _]} ->
        {:ok,
         %{
           now: Connector.int(now),
           score: score,
           fields: Jobs.pairs(fields),
           job_state: job_state,
           waiting: Connector.int(waiting) == 1
         }}

      err ->
        err
    end
  end

  defp view(id, score, row) do
    %{
      id: id,
      key: id,
      name: row["name"] || "",
      repeat: JSON.decode!(row["repeat"] || "{}"),
      template: %{
        data: row["data"] && elem(JSON.decode(row["data"]), 1),
        opts:
          %{
            priority: row["prio"] && String.to_integer(row["prio"]),
            group: row["group"],
            attempts: row["max"] && String.to_integer(row["max"]),
            backoff: row["backoff"] && JSON.decode!(row["backoff"])
          }
          |> Map.reject(fn {_, v} -> is_nil(v) end)
      },
      next_run_at: if(row["ended"] || score in ["", "inf", "+inf"], do: nil, else: String.to_integer(score)),
      iteration_count: String.to_integer(row["count"] || "0"),
      job_id: row["job"],
      ended: row["ended"]
    }
  end
end
