defmodule EchoMQ.AdminTest do
  use EchoMQ.Test.ServerCase, async: false

  alias EchoMQ.{Admin, Consumer}

  defp enqueue(conn, q, data, opts \\ []) do
    id = Jobs.new_id()
    {:ok, :enqueued} = Jobs.enqueue(conn, q, id, JSON.encode!(data), opts)
    id
  end

  defp schedule(conn, q, delay_ms) do
    id = Jobs.new_id()
    {:ok, :scheduled} = Jobs.enqueue_in(conn, q, id, "{}", delay_ms)
    id
  end

  defp state(conn, q, id) do
    {:ok, view} = Jobs.get(conn, q, id)
    view && view["state"]
  end

  defp consumer(url, q, handler) do
    start_supervised!(
      {Consumer, [url: url, queue: q, handler: handler, notify: self(), beat_ms: 100, concurrency: 4]},
      id: make_ref()
    )
  end

  defp await(kind, n) do
    for _ <- 1..n do
      receive do
        {:echomq_consumer, ^kind, id, _} -> id
      after
        15_000 -> flunk("waited for #{n} #{kind}")
      end
    end
  end

  test "pause holds claims until resume; each says whether it changed anything", %{conn: conn, url: url} do
    assert {:ok, true} = Admin.pause(conn, "p")
    assert {:ok, false} = Admin.pause(conn, "p")
    id = enqueue(conn, "p", %{})
    consumer(url, "p", fn _ -> :ok end)
    refute_receive {:echomq_consumer, :completed, _, _}, 400
    assert state(conn, "p", id) == "pending"
    assert {:ok, true} = Admin.resume(conn, "p")
    assert [^id] = await(:completed, 1)
    assert {:ok, false} = Admin.resume(conn, "p")
  end

  test "changing a job that has not started: promote, reschedule, reprioritize, update, remove",
       %{conn: conn} do
    later = schedule(conn, "w", 3_600_000)
    assert :ok = Admin.promote(conn, "w", later)
    assert state(conn, "w", later) == "pending"
    assert {:error, {:state, why}} = Admin.promote(conn, "w", later)
    assert why =~ "pending"

    {:ok, [secs, _]} = Connector.command(conn, ["TIME"])
    assert {:ok, at} = Admin.reschedule_in(conn, "w", later, 60_000)
    assert_in_delta at, String.to_integer(secs) * 1000 + 60_000, 5_000
    assert state(conn, "w", later) == "scheduled"
    assert {:ok, 5_000_000_000_000} = Admin.reschedule_at(conn, "w", later, 5_000_000_000_000)
    assert {:error, {:input, _}} = Admin.reschedule_in(conn, "w", later, -1)

    assert :ok = Admin.reprioritize(conn, "w", later, 7)
    assert {:ok, %{"priority" => 7}} = Jobs.get(conn, "w", later)
    assert {:error, {:input, _}} = Admin.reprioritize(conn, "w", later, -3)

    assert :ok = Admin.update(conn, "w", later, JSON.encode!(%{"v" => 2}))
    assert {:ok, %{"data" => %{"v" => 2}}} = Jobs.get(conn, "w", later)
    assert {:error, {:input, _}} = Admin.update(conn, "w", later, "{not json")
    assert {:error, :too_big} = Admin.update(conn, "w", later, JSON.encode!(String.duplicate("x", 600_000)))

    assert {:ok, true} = Admin.remove(conn, "w", later)
    assert {:ok, false} = Admin.remove(conn, "w", later)
    assert {:error, :no_job} = Admin.promote(conn, "w", later)
    assert {:error, :kind} = Admin.remove(conn, "w", "nope")
  end

  test "retry and retry_all return ended jobs to pending; counts and clean see every state",
       %{conn: conn, url: url} do
    ids = for n <- 1..6, do: enqueue(conn, "r", %{"n" => n}, attempts: 1)
    consumer(url, "r", fn job -> if rem(job.data["n"], 2) == 0, do: {:error, "even"}, else: :ok end)
    await(:completed, 3)
    await(:failed, 3)

    assert {:ok, %{"completed" => 3, "dead" => 3, "pending" => 0, "active" => 0}} = Admin.counts(conn, "r")
    running = schedule(conn, "r", 3_600_000)
    assert {:error, {:state, why}} = Admin.retry(conn, "r", running)
    assert why =~ "scheduled"
    assert {:error, :no_job} = Admin.retry(conn, "r", Jobs.new_id())
    assert {:error, {:input, _}} = Admin.retry_all(conn, "r", state: "pending")

    # The retried dead jobs fail again; retry_all took each once.
    assert {:ok, 3} = Admin.retry_all(conn, "r")
    await(:failed, 3)
    assert {:ok, %{"dead" => 3, "completed" => 3, "scheduled" => 1}} = Admin.counts(conn, "r")
    [first | _] = ids
    assert :ok = Admin.retry(conn, "r", first)
    await(:completed, 1)

    assert {:ok, 3} = Admin.clean(conn, "r", "dead", 0, 100)
    assert {:ok, 0} = Admin.clean(conn, "r", "completed", 3_600_000, 100)
    assert {:error, {:input, _}} = Admin.clean(conn, "r", "active", 0, 100)
    assert {:ok, %{"dead" => 0, "completed" => 3}} = Admin.counts(conn, "r")
  end

  test "drain deletes waiting jobs, scheduled ones only when asked", %{conn: conn} do
    for n <- 1..25, do: enqueue(conn, "d", %{"n" => n})
    for _ <- 1..4, do: schedule(conn, "d", 3_600_000)
    assert {:ok, 25} = Admin.drain(conn, "d", batch: 10)
    assert {:ok, %{"pending" => 0, "scheduled" => 4}} = Admin.counts(conn, "d")
    assert {:ok, 4} = Admin.drain(conn, "d", scheduled: true)
    assert {:ok, %{"scheduled" => 0}} = Admin.counts(conn, "d")
    assert {:error, {:input, _}} = Admin.drain(conn, "d", batch: 0)
  end

  test "wait_for answers each end, and a timeout while the job waits", %{conn: conn, url: url} do
    ok = enqueue(conn, "f", %{"ok" => true}, attempts: 1)
    bad = enqueue(conn, "f", %{"ok" => false}, attempts: 1)
    waiting = schedule(conn, "f", 3_600_000)
    waiters = for id <- [ok, bad], do: Task.async(fn -> Admin.wait_for(conn, "f", id) end)
    consumer(url, "f", fn job -> if job.data["ok"], do: {:ok, %{"r" => 1}}, else: {:error, "boom"} end)
    assert [{:ok, %{"r" => 1}}, {:error, {:failed, "boom"}}] = Task.await_many(waiters, 15_000)

    assert {:error, :timeout} = Admin.wait_for(conn, "f", waiting, timeout_ms: 300)
    {:ok, _} = Jobs.cancel(conn, "f", waiting)
    assert {:error, :cancelled} = Admin.wait_for(conn, "f", waiting)
    assert {:error, :no_job} = Admin.wait_for(conn, "f", Jobs.new_id())
    assert {:error, {:input, _}} = Admin.wait_for(conn, "f", ok, timeout_ms: -1)
  end
end
