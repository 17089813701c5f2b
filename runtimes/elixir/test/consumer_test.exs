defmodule EchoMQ.ConsumerTest do
  use EchoMQ.Test.ServerCase, async: false

  alias EchoMQ.Consumer

  defp enqueue(conn, q, data, opts \\ []) do
    id = Jobs.new_id()
    {:ok, :enqueued} = Jobs.enqueue(conn, q, id, JSON.encode!(data), opts)
    id
  end

  defp collect(kind, n, acc \\ []) do
    if length(acc) >= n do
      Enum.reverse(acc)
    else
      receive do
        {:echomq_consumer, ^kind, id, info} -> collect(kind, n, [{id, info} | acc])
      after
        15_000 -> flunk("waited for #{n} #{kind}, got #{length(acc)}")
      end
    end
  end

  defp consumer(url, q, handler, opts \\ []) do
    start_supervised!(
      {Consumer, [url: url, queue: q, handler: handler, notify: self(), beat_ms: 200] ++ opts},
      id: make_ref()
    )
  end

  defp counts(conn, q) do
    for set <- ~w(pending active completed dead schedule), into: %{} do
      {:ok, n} = Connector.command(conn, ["ZCARD", "emq:{#{q}}:" <> set])
      {set, String.to_integer(n)}
    end
  end

  test "runs every job once and stores its result", %{conn: conn, url: url} do
    ids = for n <- 1..30, do: enqueue(conn, "c1", %{"n" => n})
    consumer(url, "c1", fn job -> {:ok, %{"double" => job.data["n"] * 2}} end, concurrency: 4)
    done = collect(:completed, 30)
    assert Enum.sort(Enum.map(done, &elem(&1, 0))) == Enum.sort(ids)
    {:ok, view} = Jobs.get(conn, "c1", hd(ids))
    assert %{"state" => "completed", "result" => %{"double" => 2}, "attempts" => 1} = view
    assert %{"completed" => 30, "active" => 0, "pending" => 0} = counts(conn, "c1")
  end

  test "a failing job retries by its backoff; the last attempt and an unrecoverable one end dead",
       %{conn: conn, url: url} do
    retried = enqueue(conn, "c2", %{"fail" => 2}, backoff: {:fixed, 50})
    exhausted = enqueue(conn, "c2", %{"fail" => 9}, attempts: 2, backoff: {:fixed, 10})
    unrecoverable = enqueue(conn, "c2", %{"unrecoverable" => true})

    consumer(url, "c2", fn job ->
      cond do
        job.data["unrecoverable"] -> {:unrecoverable, "no way"}
        job.attempts <= job.data["fail"] -> raise "attempt #{job.attempts} fails"
        true -> {:ok, job.attempts}
      end
    end)

    fails = collect(:failed, 2 + 2 + 1)
    assert [{^retried, _}] = collect(:completed, 1)
    by = Enum.group_by(fails, &elem(&1, 0), fn {_, i} -> i.outcome end)
    assert by[retried] == ["retry", "retry"]
    assert by[exhausted] == ["retry", "dead"]
    assert by[unrecoverable] == ["dead"]
    {:ok, v} = Jobs.get(conn, "c2", retried)

    assert %{
             "state" => "completed",
             "attempts" => 3,
             "result" => 3,
             "error" => %{"message" => "attempt 2 fails"}
           } = v

    assert v["error"]["stack"] =~ "consumer_test.exs"
    {:ok, d} = Jobs.get(conn, "c2", unrecoverable)
    assert %{"state" => "dead", "attempts" => 1} = d
  end

  test "a delayed job runs at its instant, never before", %{conn: conn, url: url} do
    id = Jobs.new_id()
    {:ok, :scheduled} = Jobs.enqueue_in(conn, "c3", id, "{}", 400)
    consumer(url, "c3", fn _ -> :ok end)
    [{^id, _}] = collect(:completed, 1)
    {:ok, v} = Jobs.get(conn, "c3", id)
    assert v["startedAt"] >= v["createdAt"] + 400
  end

  test "close waits for running handlers, then hands back what still runs", %{conn: conn, url: url} do
    quick = enqueue(conn, "c4", %{"ms" => 10})
    slow = enqueue(conn, "c4", %{"ms" => 60_000})

    pid = consumer(url, "c4", fn job -> Process.sleep(job.data["ms"]) && :ok end, close_timeout_ms: 300)

    collect(:active, 2)
    [{^quick, _}] = collect(:completed, 1)
    assert :ok = Consumer.close(pid)
    {:ok, v} = Jobs.get(conn, "c4", slow)
    # Handed back: pending again, its attempt given back.
    assert %{"state" => "pending", "attempts" => 0} = v
  end

  test "a consumer killed holding jobs: another recovers them after the lease, each ends once",
       %{conn: conn, url: url} do
    ids = for n <- 1..6, do: enqueue(conn, "c5", %{"n" => n})
    me = self()

    victim =
      start_supervised!(
        {Consumer,
         [
           url: url,
           queue: "c5",
           beat_ms: 200,
           lease_ms: 600,
           handler: fn _ ->
             send(me, :held)
             Process.sleep(:infinity)
           end
         ]},
        id: :victim,
        restart: :temporary
      )

    for _ <- 1..6, do: assert_receive(:held, 5_000)
    Process.exit(victim, :kill)
    consumer(url, "c5", fn job -> {:ok, job.attempts} end, lease_ms: 600)
    done = collect(:completed, 6)
    assert Enum.sort(Enum.map(done, &elem(&1, 0))) == Enum.sort(ids)
    refute_receive {:echomq_consumer, :completed, _, _}, 500
    assert %{"completed" => 6, "active" => 0} = counts(conn, "c5")
  end

  test "a cancel asked while it runs stops the handler and ends the job cancelled",
       %{conn: conn, url: url} do
    id = enqueue(conn, "c6", %{})
    me = self()

    consumer(
      url,
      "c6",
      fn _ ->
        send(me, :running)
        Process.sleep(:infinity)
      end,
      lease_ms: 600
    )

    assert_receive :running, 5_000
    assert {:ok, "requested"} = Jobs.cancel(conn, "c6", id)
    [{^id, %{outcome: "cancelled"}}] = collect(:failed, 1)
    {:ok, v} = Jobs.get(conn, "c6", id)
    assert v["state"] == "cancelled"
  end

  test "progress from the handler is stored on the row", %{conn: conn, url: url} do
    id = enqueue(conn, "c7", %{})
    consumer(url, "c7", fn job -> :ok = Consumer.progress(job, %{"at" => 1}) end)
    collect(:completed, 1)
    {:ok, v} = Jobs.get(conn, "c7", id)
    assert v["progress"] == %{"at" => 1}
  end
end
