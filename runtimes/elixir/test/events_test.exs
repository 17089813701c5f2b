defmodule EchoMQ.EventsTest do
  use EchoMQ.Test.ServerCase, async: false

  alias EchoMQ.{Consumer, QueueEvents, Stalled}

  test "QueueEvents delivers the lifecycle to subscribers, batched entries expanded", %{conn: conn, url: url} do
    ev = start_supervised!({QueueEvents, url: url, queue: "e1", block_ms: 200})
    :ok = QueueEvents.subscribe(ev)
    ids = for _ <- 1..3, do: Jobs.new_id()
    {:ok, _} = Jobs.enqueue_many(conn, "e1", Enum.map(ids, &{&1, "{}", [name: "n"]}))
    for id <- ids, do: assert_receive({:echomq_event, :added, %{"id" => ^id, "name" => "n"}}, 5_000)
    start_supervised!({Consumer, url: url, queue: "e1", beat_ms: 200, handler: fn _ -> :ok end})
    for id <- ids, do: assert_receive({:echomq_event, :active, %{"id" => ^id, "attempt" => "1"}}, 5_000)
    for id <- ids, do: assert_receive({:echomq_event, :completed, %{"id" => ^id}}, 5_000)
    :ok = QueueEvents.unsubscribe(ev)
    {:ok, _} = Jobs.enqueue(conn, "e1", Jobs.new_id(), "{}")
    refute_receive {:echomq_event, :added, _}, 600
  end

  test "from 0 it replays what the stream keeps", %{conn: conn, url: url} do
    id = Jobs.new_id()
    {:ok, :scheduled} = Jobs.enqueue_in(conn, "e2", id, "{}", 60_000)
    ev = start_supervised!({QueueEvents, url: url, queue: "e2", last_event_id: "0", block_ms: 200})
    :ok = QueueEvents.subscribe(ev)
    assert_receive {:echomq_event, :delayed, %{"id" => ^id, "at" => _}}, 5_000
  end

  test "Stalled returns an expired lease to pending", %{conn: conn, url: url} do
    id = Jobs.new_id()
    {:ok, :enqueued} = Jobs.enqueue(conn, "e3", id, "{}")
    {:ok, [[^id | _] | _]} = Jobs.run(conn, "e3", "claim", nil, ["emq:{e3}:", 1, 1])
    Process.sleep(20)
    start_supervised!({Stalled, url: url, queue: "e3", interval_ms: 50})
    Process.sleep(400)
    assert {:ok, %{"state" => "pending", "stalled" => 1}} = Jobs.get(conn, "e3", id)
  end
end
