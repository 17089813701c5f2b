defmodule EchoMQ.CronTest do
  # The shared next-run table (test/recurring/next-run-cases.json), the one TypeScript's
  # src/recurring/next-run.ts (croner, the reference) and the Go runtime are held to: every case
  # this runtime can answer (a cron pattern alone, in UTC) gives the same next run or error.
  use ExUnit.Case, async: true

  alias EchoMQ.{Cron, JSON}

  @table Path.expand("../../../test/recurring/next-run-cases.json", __DIR__)
  @external_resource @table

  defp utc_cron_cases do
    {:ok, %{"cases" => cases}} = JSON.decode(File.read!(@table))

    Enum.filter(cases, fn c -> Map.keys(c["repeat"]) == ["pattern"] and c["count"] == 0 end)
  end

  defp ms(iso) do
    {:ok, dt, 0} = DateTime.from_iso8601(iso)
    DateTime.to_unix(dt, :millisecond)
  end

  test "every UTC cron case of the shared table, croner's L, W and # included" do
    cases = utc_cron_cases()
    assert length(cases) >= 35
    assert Enum.any?(cases, &String.contains?(&1["repeat"]["pattern"], "#"))

    problems =
      for c <- cases,
          got = Cron.next(c["repeat"]["pattern"], ms(c["ref"])),
          problem =
            (case {c, got} do
               {%{"error" => "EMQCRON"}, {:error, {:cron, _}}} ->
                 nil

               {%{"next" => next}, {:ok, at}} when is_binary(next) ->
                 if at == ms(next), do: nil, else: {:next, at}

               _ ->
                 {:got, got}
             end),
          problem != nil,
          do: {c["name"], c["repeat"]["pattern"], problem}

    assert problems == []
  end

  test "a pattern it cannot read says what is wrong" do
    assert {:error, {:cron, why}} = Cron.parse("0 0 * * 5#6")
    assert why =~ "1-5 or L after '#'"
    assert {:error, {:cron, why}} = Cron.parse("0 0 1-15W * *")
    assert why =~ "W (the nearest weekday) takes one day"
    assert {:error, {:cron, why}} = Cron.parse("0 9 LW * +6")
    assert why =~ "never matches"
    assert {:error, {:cron, why}} = Cron.parse("0 0 5/10 * *")
    assert why =~ "numeric prefix"
    assert {:error, {:cron, why}} = Cron.parse("0 0 * *")
    assert why =~ "4 fields"
  end
end
