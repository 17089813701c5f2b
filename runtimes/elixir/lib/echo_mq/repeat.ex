defmodule EchoMQ.Repeat do
  @moduledoc """
  Fixed cadences (SPEC 15, 19.23-19.25), over the scripts TypeScript's `q.repeat` and Go's
  `Repeat` call: `register/6`, `unregister/3`, `list/2` and `pump/3`. A registration is a
  member of `P repeat` scored by its upcoming slot plus a `P repeat:<name>` record; the slot's
  occurrence is a delayed job already, and promote, releasing one, makes the next in the same
  call, on the server clock. The pump is the backstop for a slot nothing released; the
  consumer's recurrence leg runs it once a beat.
  """

  alias EchoMQ.{Connector, Jobs, Keyspace}

  @doc """
  Registers a cadence: every `every_ms` from the first run, a job with `template` (JSON text)
  as its data and `name` as its name. `{:ok, :registered}`, or `{:ok, :exists}` when the name
  is registered already (nothing changes: unregister first to change it).

  Options: `:first_run_ms` (the first occurrence's instant, epoch ms on the server clock;
  default server now + `every_ms`), `:catch_up` (`:once`, default: one occurrence for missed
  slots, or `:all`: every missed slot, oldest first), `:attempts` (each occurrence's; default 1,
  the next occurrence being the retry).
  """
  def register(conn, queue, name, every_ms, template, opts \\ []) do
    first = opts[:first_run_ms]
    catch_up = opts[:catch_up] || :once
    attempts = opts[:attempts]

    cond do
      not (is_integer(every_ms) and every_ms >= 1) ->
        {:error, {:input, "every_ms must be a whole number >= 1, got #{inspect(every_ms)}"}}

      first != nil and not (is_integer(first) and first >= 0) ->
        {:error, {:input, ":first_run_ms must be a whole number >= 0 (epoch ms), got #{inspect(first)}"}}

      catch_up not in [:once, :all] ->
        {:error, {:input, ":catch_up must be :once or :all, got #{inspect(catch_up)}"}}

      attempts != nil and not (is_integer(attempts) and attempts in 1..1_000_000) ->
        {:error, {:input, ":attempts must be a whole number from 1 to 1000000, got #{inspect(attempts)}"}}

      true ->
        with :ok <- Keyspace.check_name("repeat name", name),
             :ok <- Jobs.check_json(template, "the template"),
             {:ok, n} <-
               Jobs.run(conn, queue, "register", nil, [
                 name,
                 every_ms,
                 template,
                 if(first, do: Integer.to_string(first), else: "next"),
                 Keyspace.prefix(queue),
                 Atom.to_string(catch_up),
                 if(attempts, do: Integer.to_string(attempts), else: "")
               ]) do
          {:ok, if(Connector.int(n) == 1, do: :registered, else: :exists)}
        end
    end
  end

  @doc "Removes a cadence; occurrences made already stay ordinary jobs. `{:ok, true}` when it existed."
  def unregister(conn, queue, name) do
    with :ok <- Keyspace.check_name("repeat name", name),
         {:ok, n} <- Jobs.run(conn, queue, "unregister", nil, [Keyspace.prefix(queue), name]) do
      {:ok, Connector.int(n) == 1}
    end
  end

  @doc """
  Every registered cadence, soonest next run first: maps with `:name`, `:every_ms`, `:template`,
  `:next_run_at`, `:catch_up`, `:attempts` (nil: 1), `:runs`, `:last_run_at` (nil: never),
  `:created_at`.
  """
  def list(conn, queue) do
    with {:ok, _} <- Jobs.hello(conn, queue),
         {:ok, flat} <-
           Connector.command(conn, ["ZRANGE", Keyspace.queue_key(queue, "repeat"), "0", "-1", "WITHSCORES"]) do
      pairs = Enum.chunk_every(flat, 2)
      reads = Enum.map(pairs, fn [name, _] -> ["HGETALL", Keyspace.queue_key(queue, "repeat:" <> name)] end)
      rows = if reads == [], do: [], else: Connector.pipeline(conn, reads)

      views =
        for {[name, score], {:ok, row}} <- Enum.zip(pairs, rows),
            row = Jobs.pairs(row),
            # Unregistered between the two reads.
            row["every_ms"] != nil do
          %{
            name: name,
            every_ms: String.to_integer(row["every_ms"]),
            template: row["template"],
            next_run_at: String.to_integer(score),
            catch_up: if(row["catch_up"] == "all", do: :all, else: :once),
            attempts: row["max"] && String.to_integer(row["max"]),
            runs: String.to_integer(row["runs"] || "0"),
            last_run_at: row["last"] && String.to_integer(row["last"]),
            created_at: row["created"] && String.to_integer(row["created"])
          }
        end

      {:ok, views}
    end
  end

  @doc """
  Releases every due occurrence nothing released (at most `batch` slots): `{:ok, %{released:
  ids, now_ms:, next_due_ms:}}`, `next_due_ms` -1 when nothing is registered.
  """
  def pump(conn, queue, batch \\ 100) when is_integer(batch) and batch >= 1 do
    case Jobs.run(conn, queue, "pump", nil, [Keyspace.prefix(queue), batch]) do
      {:ok, [released, now, next | _]} ->
        {:ok, %{released: released, now_ms: Connector.int(now), next_due_ms: Connector.int(next)}}

      {:ok, other} ->
        {:error, {:protocol, "pump replied #{inspect(other)}, not [released, now_ms, next_due_ms]"}}

      err ->
        err
    end
  end
end
