defmodule EchoMQ.ConformanceTest do
  # Every protocol/conformance/ case replayed from Elixir (SPEC 23, 25.5).
  use EchoMQ.Test.ServerCase, async: false

  alias EchoMQ.Conformance

  test "every conformance case passes", %{conn: conn} do
    report = Conformance.replay_all(conn)
    IO.puts("\nconformance: #{report.passed}/#{report.total} cases pass from Elixir")
    assert report.failures == []
    assert report.total > 100
  end

  test "a case of a later level, or an unknown placeholder, is refused, never half-replayed", %{conn: conn} do
    [file | _] = Conformance.load(Conformance.dir())
    c = hd(file["cases"])
    later = Map.put(c, "level", EchoMQ.Jobs.known_level() + 1)
    assert {:ok, [msg]} = Conformance.replay(conn, later)
    assert msg =~ "this replayer knows level #{EchoMQ.Jobs.known_level()}"
    odd = put_in(c, ["expect", "reply"], "$later_thing")

    odd =
      Map.delete(odd, "level")
      |> put_in(["expect"], Map.delete(odd["expect"], "error") |> Map.put("reply", "$later_thing"))

    assert {:error, msg} = Conformance.replay(conn, odd)
    assert msg =~ "unknown placeholder $later_thing"
  end

  test "the replay is strict: 1 is not \"1\", and a wrong key state is reported", %{conn: conn} do
    [file] = Enum.filter(Conformance.load(Conformance.dir()), &(&1["script"] == "enqueue"))
    c = Enum.find(file["cases"], &match?([1 | _], &1["expect"]["reply"]))
    assert {:ok, []} = Conformance.replay(conn, c)
    as_text = put_in(c, ["expect", "reply"], ["1" | tl(c["expect"]["reply"])])
    assert {:ok, [problem | _]} = Conformance.replay(conn, as_text)
    assert problem =~ "reply[0]: expected \"1\", got 1"
    wrong = put_in(c, ["expect", "keys"], %{"emq:{#{c["queue"]}}:pending" => "absent"})
    assert {:ok, [_ | _]} = Conformance.replay(conn, wrong)
  end
end
