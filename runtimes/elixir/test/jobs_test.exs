defmodule EchoMQ.JobsTest do
  use EchoMQ.Test.ServerCase, async: false
  doctest EchoMQ.JSON

  test "hello stamps version 2 and says the level and features", %{conn: conn} do
    assert {:ok, %{version: 2, level: 2, features: []}} = Jobs.hello(conn, "hq")
    assert {:ok, "2"} = Connector.command(conn, ["HGET", "emq:{hq}:meta", "version"])
    assert {:ok, ["hq"]} = Connector.command(conn, ["SMEMBERS", "emq:queues"])
  end

  test "protocol_version: 1 stamps 1; a stamped queue keeps its version", %{conn: conn, url: url} do
    v1 = Connector.connect!(url: url, protocol_version: 1)
    assert {:ok, %{version: 1}} = Jobs.hello(v1, "old")
    assert {:ok, %{version: 1}} = Jobs.hello(conn, "old")
    assert {:ok, %{version: 2}} = Jobs.hello(conn, "new")
    assert {:ok, %{version: 2}} = Jobs.hello(v1, "new")
    # The default 3 attempts: written as max on version 1, left out of the row on version 2.
    for {queue, max} <- [{"old", "3"}, {"new", nil}] do
      id = Jobs.new_id()
      assert {:ok, :enqueued} = Jobs.enqueue(v1, queue, id, "{}")
      assert {:ok, ^max} = Connector.command(conn, ["HGET", "emq:{#{queue}}:job:#{id}", "max"])
      assert {:ok, %{"maxAttempts" => 3}} = Jobs.get(conn, queue, id)
    end

    Connector.close(v1)
    assert {:error, {:input, msg}} = Connector.connect(url: url, protocol_version: 3)
    assert msg =~ "1..2"
  end

  test "a queue at a version it does not speak is refused at hello", %{conn: conn} do
    {:ok, _} = Connector.command(conn, ["HSET", "emq:{v9}:meta", "version", "9"])
    assert {:error, {:protocol, msg}} = Jobs.hello(conn, "v9")
    assert msg =~ "EMQPROTOCOL"
  end

  test "enqueue, the seeds' shapes, and get decodes the row", %{conn: conn} do
    id = Jobs.new_id()
    payload = JSON.encode!(%{"to" => "a@example.com", "n" => 1.5})

    assert {:ok, :enqueued} =
             Jobs.enqueue(conn, "q", id, payload,
               name: "mail",
               attempts: 4,
               priority: 2,
               backoff: {:fixed, 30}
             )

    assert {:ok, :duplicate} = Jobs.enqueue(conn, "q", id, payload)
    assert {:error, :kind} = Jobs.enqueue(conn, "q", "NOPE1", payload)
    assert {:error, {:input, _}} = Jobs.enqueue(conn, "q", Jobs.new_id(), "{not json")
    assert {:ok, view} = Jobs.get(conn, "q", id)

    assert %{
             "state" => "pending",
             "data" => %{"to" => "a@example.com", "n" => 1.5},
             "maxAttempts" => 4,
             "priority" => 2,
             "name" => "mail",
             "attempts" => 0,
             "backoff" => %{"kind" => "fixed", "ms" => 30}
           } = view

    assert abs(view["createdAt"] - System.system_time(:millisecond)) < 5_000
    assert {:ok, nil} = Jobs.get(conn, "q", Jobs.new_id())
  end

  test "enqueue_at and enqueue_in fence the job on the schedule set, on the server clock", %{conn: conn} do
    a = Jobs.new_id()
    b = Jobs.new_id()
    assert {:ok, :scheduled} = Jobs.enqueue_at(conn, "s", a, "1", 1000)
    assert {:ok, :duplicate} = Jobs.enqueue_at(conn, "s", a, "1", 1000)
    assert {:ok, :scheduled} = Jobs.enqueue_in(conn, "s", b, "2", 60_000)
    assert {:error, :kind} = Jobs.enqueue_in(conn, "s", "X", "2", 10)
    {:ok, [_, score]} = Connector.command(conn, ["ZRANGE", "emq:{s}:schedule", "1", "1", "WITHSCORES"])
    {:ok, [secs, _]} = Connector.command(conn, ["TIME"])
    assert_in_delta String.to_integer(score), String.to_integer(secs) * 1000 + 60_000, 5_000
    # The past one is due now: promote releases it, the future one stays.
    assert {:ok, 1} = Jobs.promote(conn, "s", 100)
    assert {:ok, %{"state" => "pending"}} = Jobs.get(conn, "s", a)
    assert {:ok, %{count: 0, next_due_ms: next}} = Jobs.promote(conn, "s", 100, next: true)
    assert next == String.to_integer(score)
  end

  test "minted ids sort in mint order and carry their instant" do
    ids = for _ <- 1..500, do: Jobs.new_id()
    assert ids == Enum.sort(ids)
    assert length(Enum.uniq(ids)) == 500
    assert abs(EchoMQ.Ids.minted_at(hd(ids)) - System.system_time(:millisecond)) < 5_000
  end

  test "NOSCRIPT falls back to EVAL, and pipelines answer per command", %{conn: conn} do
    {:ok, "OK"} = Connector.command(conn, ["SCRIPT", "FLUSH"])
    assert {:ok, %{version: 2}} = Jobs.hello(conn, "ns")

    assert [{:ok, "PONG"}, {:error, {:server, "ERR" <> _}}, {:ok, nil}] =
             Connector.pipeline(conn, [["PING"], ["NOSUCHCMD"], ["GET", "nope"]])

    assert {:ok, 7} = Connector.typed_command(conn, ["EVAL", "return 7", "0"])
    assert {:ok, "7"} = Connector.command(conn, ["EVAL", "return 7", "0"])
  end

  test "no server: a clear error, not a crash" do
    assert {:error, {:no_server, msg}} = Connector.connect(url: "redis://127.0.0.1:1")
    assert msg =~ "no redis-server"
  end
end
