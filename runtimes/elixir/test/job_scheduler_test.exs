defmodule EchoMQ.JobSchedulerTest do
  use EchoMQ.Test.ServerCase, async: false
  doctest EchoMQ.JobScheduler
  doctest EchoMQ.Cron

  alias EchoMQ.{Consumer, JobScheduler}

  test "upsert is idempotent on unchanged options and replaces on new ones", %{conn: conn} do
    assert {:ok, %{status: :created, next_run_at: at, job_id: job}} =
             JobScheduler.upsert(conn, "s1", "tick", %{every: 60_000}, "tick-job", %{"k" => 1})

    assert {:ok, %{status: :updated, next_run_at: ^at, job_id: ^job}} =
             JobScheduler.upsert(conn, "s1", "tick", %{every: 60_000}, "tick-job", %{"k" => 2})

    assert {:ok, %{status: :replaced, job_id: other}} =
             JobScheduler.upsert(conn, "s1", "tick", %{every: 30_000}, "tick-job")

    assert other != job
    assert {:ok, "{\"every\":30000}"} = Connector.command(conn, ["HGET", "emq:{s1}:scheduler:tick", "repeat"])
    {:ok, _} = JobScheduler.upsert(conn, "s1", "nightly", %{pattern: "0 3 * * *"}, nil)
    assert {:ok, 2} = JobScheduler.count(conn, "s1")

    assert {:ok, [%{id: "tick"}, %{id: "nightly", repeat: %{"pattern" => "0 3 * * *"}}]} =
             JobScheduler.list(conn, "s1")

    {:ok, ahead} = Connector.command(conn, ["HGET", "emq:{s1}:scheduler:nightly", "ahead"])
    assert length(String.split(ahead)) == 16
    assert {:ok, %{name: "tick-job", iteration_count: 1}} = JobScheduler.get(conn, "s1", "tick")
    assert {:ok, true} = JobScheduler.remove(conn, "s1", "tick")
    assert {:ok, false} = JobScheduler.remove_by_key(conn, "s1", "tick")
    assert {:ok, nil} = JobScheduler.get(conn, "s1", "tick")
    assert {:error, {:cron, _}} = JobScheduler.upsert(conn, "s1", "bad", %{pattern: "0 0 * * MUN"}, nil)
    assert {:error, {:cron, _}} = JobScheduler.upsert(conn, "s1", "bad", %{pattern: "0 0 * * 5#6"}, nil)
    assert {:error, {:input, _}} = JobScheduler.upsert(conn, "s1", "bad", %{every: 0}, nil)
  end

  test "an every scheduler runs occurrence after occurrence under an Elixir consumer", %{conn: conn, url: url} do
    {:ok, %{status: :created}} =
      JobScheduler.upsert(conn, "s2", "fast", %{every: 150, limit: 3}, "beat", %{"x" => 1})

    start_supervised!(
      {Consumer, url: url, queue: "s2", beat_ms: 100, notify: self(), handler: fn j -> {:ok, j.data} end}
    )

    for _ <- 1..3, do: assert_receive({:echomq_consumer, :completed, "JOB" <> _, _}, 5_000)
    refute_receive {:echomq_consumer, :completed, _, _}, 600
    assert {:ok, %{ended: "limit", iteration_count: 3}} = JobScheduler.get(conn, "s2", "fast")
  end

  test "a cron scheduler whose lookahead is gone is handed off by the Elixir consumer's recurrence leg",
       %{conn: conn, url: url} do
    {:ok, %{status: :created}} =
      JobScheduler.upsert(conn, "s3", "each-second", %{pattern: "* * * * * *", limit: 3}, "cron")

    # Without its lookahead promote cannot follow a released occurrence: the runtime must.
    {:ok, _} = Connector.command(conn, ["HDEL", "emq:{s3}:scheduler:each-second", "ahead"])

    start_supervised!(
      {Consumer, url: url, queue: "s3", beat_ms: 100, notify: self(), handler: fn _ -> :ok end}
    )

    ids =
      for _ <- 1..3,
          do:
            (
              assert_receive({:echomq_consumer, :completed, id, _}, 8_000)
              id
            )

    assert length(Enum.uniq(ids)) == 3
    assert Enum.all?(ids, &String.contains?(&1, ":s:each-second"))
    refute_receive {:echomq_consumer, :completed, _, _}, 1_500
    assert {:ok, %{ended: "limit", iteration_count: 3}} = JobScheduler.get(conn, "s3", "each-second")
  end
end
