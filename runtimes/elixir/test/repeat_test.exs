defmodule EchoMQ.RepeatTest do
  use EchoMQ.Test.ServerCase, async: false

  alias EchoMQ.{Consumer, Repeat}

  defp server_ms(conn) do
    {:ok, [secs, micros]} = Connector.command(conn, ["TIME"])
    String.to_integer(secs) * 1000 + div(String.to_integer(micros), 1000)
  end

  test "register, list and unregister; a name registered twice is left as it is", %{conn: conn} do
    assert {:ok, :registered} = Repeat.register(conn, "r1", "tick", 60_000, ~s({"n":1}), attempts: 2)
    assert {:ok, :exists} = Repeat.register(conn, "r1", "tick", 5_000, ~s({"n":2}))

    assert {:ok,
            [
              %{name: "tick", every_ms: 60_000, template: ~s({"n":1}), attempts: 2, runs: 0, catch_up: :once} =
                v
            ]} = Repeat.list(conn, "r1")

    assert_in_delta v.next_run_at, server_ms(conn) + 60_000, 5_000
    assert {:ok, true} = Repeat.unregister(conn, "r1", "tick")
    assert {:ok, false} = Repeat.unregister(conn, "r1", "tick")
    assert {:ok, []} = Repeat.list(conn, "r1")
    # The upcoming occurrence went with it.
    assert {:ok, "0"} = Connector.command(conn, ["ZCARD", "emq:{r1}:schedule"])
  end

  test "bad options say what is wrong and write nothing", %{conn: conn} do
    assert {:error, {:input, _}} = Repeat.register(conn, "r2", "x", 0, "{}")
    assert {:error, {:input, _}} = Repeat.register(conn, "r2", "x", 100, "{}", catch_up: :some)
    assert {:error, {:input, _}} = Repeat.register(conn, "r2", "x", 100, "{}", attempts: 0)
    assert {:error, {:input, _}} = Repeat.register(conn, "r2", "x", 100, "{nope")
    assert {:error, {:input, _}} = Repeat.register(conn, "r2", "", 100, "{}")
    assert {:ok, []} = Repeat.list(conn, "r2")
  end

  test "the pump releases every missed slot of a catch_up :all cadence, oldest first, once", %{conn: conn} do
    first = server_ms(conn) - 1_000

    assert {:ok, :registered} =
             Repeat.register(conn, "r3", "late", 200, "{}", first_run_ms: first, catch_up: :all)

    assert {:ok, %{released: released, now_ms: now, next_due_ms: next}} = Repeat.pump(conn, "r3", 100)
    # Slots first, first + 200, ... up to the pump's now, each released once.
    assert length(released) == div(now - first, 200) + 1
    assert length(Enum.uniq(released)) == length(released)
    assert next > now
    assert {:ok, %{released: []}} = Repeat.pump(conn, "r3", 100)
    {:ok, pending} = Connector.command(conn, ["ZRANGE", "emq:{r3}:pending", "0", "-1"])
    assert Enum.sort(pending) == Enum.sort(released)
  end

  test "an Elixir consumer alone serves a cadence: occurrences in order, none twice, none early",
       %{conn: conn, url: url} do
    assert {:ok, :registered} = Repeat.register(conn, "r4", "beat", 150, ~s({"k":"v"}))

    start_supervised!(
      {Consumer,
       [url: url, queue: "r4", handler: fn job -> {:ok, job.data} end, notify: self(), beat_ms: 100]},
      id: make_ref()
    )

    ids =
      for _ <- 1..5 do
        receive do
          {:echomq_consumer, :completed, id, _} -> id
        after
          15_000 -> flunk("a cadence occurrence did not run")
        end
      end

    assert length(Enum.uniq(ids)) == 5
    # Each ran at or after its slot (the row's runat), on the server clock.
    for id <- ids do
      {:ok, %{"runAt" => at, "startedAt" => started, "result" => result}} = Jobs.get(conn, "r4", id)
      assert started >= at
      assert result == %{"k" => "v"}
    end

    assert {:ok, [%{runs: runs}]} = Repeat.list(conn, "r4")
    assert runs >= 5
  end
end
