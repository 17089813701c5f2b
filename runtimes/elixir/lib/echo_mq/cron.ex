defmodule EchoMQ.Cron do
  @moduledoc """
  The cron subset `EchoMQ.JobScheduler` reads: 5 fields (minute hour day-of-month month
  day-of-week) or 6 (seconds first), each `*`, `N`, `A-B`, `*/S`, `A-B/S`, `N/S` or a comma
  list of those; day-of-week 0-7 (0 and 7 Sunday); when both day fields are restricted a day
  matches either (as cron does). UTC only. Not read: names (`MON`, `JAN`), `L`, `W`, `#`, `?`,
  time zones: such a pattern is refused with `{:error, {:cron, why}}`, and a scheduler of
  another runtime using them is left to that runtime.

      iex> EchoMQ.Cron.next("0 9 * * *", 1_700_000_000_000)
      {:ok, 1_700_038_800_000}
  """

  @doc "The first instant (epoch ms, a whole second) strictly after `after_ms` the pattern allows."
  @spec next(String.t(), integer()) :: {:ok, integer()} | {:error, {:cron, String.t()}}
  def next(pattern, after_ms) do
    with {:ok, c} <- parse(pattern) do
      start = div(after_ms, 1000) + 1
      dt = DateTime.from_unix!(start) |> DateTime.to_naive()
      search(c, dt, 0)
    end
  end

  @doc "Parses a pattern into its field sets."
  def parse(pattern) when is_binary(pattern) do
    fields = String.split(pattern)

    fields =
      case fields do
        [_, _, _, _, _] -> ["0" | fields]
        [_, _, _, _, _, _] -> fields
        _ -> :bad
      end

    if fields == :bad do
      {:error,
       {:cron,
        "#{inspect(pattern)} has not 5 or 6 fields (minute hour day month weekday, seconds first when 6)"}}
    else
      ranges = [{0, 59}, {0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 7}]
      names = ~w(second minute hour day-of-month month day-of-week)

      parsed =
        Enum.zip([fields, ranges, names])
        |> Enum.map(fn {f, {lo, hi}, name} -> field(f, lo, hi, name) end)

      case Enum.find(parsed, &match?({:error, _}, &1)) do
        nil ->
          [s, m, h, dom, mon, dow] = Enum.map(parsed, fn {:ok, set} -> set end)
          dow = if 7 in dow, do: MapSet.put(dow, 0), else: dow
          [_, _, _, f_dom, _, f_dow] = fields

          {:ok,
           %{s: s, m: m, h: h, dom: dom, mon: mon, dow: dow, dom_star: f_dom == "*", dow_star: f_dow == "*"}}

        err ->
          err
      end
    end
  end

  defp field(text, lo, hi, name) do
    parts = String.split(text, ",")

    Enum.reduce_while(parts, {:ok, MapSet.new()}, fn part, {:ok, acc} ->
      case part(part, lo, hi) do
        {:ok, vals} ->
          {:cont, {:ok, MapSet.union(acc, MapSet.new(vals))}}

        :error ->
          {:halt,
           {:error,
            {:cron,
             "the #{name} field #{inspect(text)} is not in the cron subset read here (#{lo}-#{hi}, *, A-B, */S, lists)"}}}
      end
    end)
  end

  defp part(p, lo, hi) do
    {range, step} =
      case String.split(p, "/") do
        [r] -> {r, 1}
        [r, s] -> {r, int(s)}
        _ -> {nil, nil}
      end

    {a, b} =
      case range && String.split(range, "-") do
        ["*"] -> {lo, hi}
        [n] -> if step == 1, do: {int(n), int(n)}, else: {int(n), hi}
        [x, y] -> {int(x), int(y)}
        _ -> {nil, nil}
      end

    if is_integer(a) and is_integer(b) and is_integer(step) and step >= 1 and a >= lo and b <= hi and a <= b,
      do: {:ok, Enum.take_every(a..b, step)},
      else: :error
  end

  defp int(s) do
    case Integer.parse(s) do
      {n, ""} -> n
      _ -> nil
    end
  end

  # Field by field, coarse to fine: a month that does not match jumps to the next month's
  # start, a day to the next day, and so on; bounded at 5 years of search.
  defp search(_c, _dt, n) when n > 200_000, do: {:error, {:cron, "no instant within 5 years matches"}}

  defp search(c, dt, n) do
    cond do
      dt.year > 9999 ->
        {:error, {:cron, "no instant matches"}}

      dt.month not in c.mon ->
        {y, m} = if dt.month == 12, do: {dt.year + 1, 1}, else: {dt.year, dt.month + 1}
        search(c, NaiveDateTime.new!(y, m, 1, 0, 0, 0), n + 1)

      not day_ok?(c, dt) ->
        search(
          c,
          NaiveDateTime.add(NaiveDateTime.new!(NaiveDateTime.to_date(dt), ~T[00:00:00]), 86_400),
          n + 1
        )

      dt.hour not in c.h ->
        search(c, NaiveDateTime.add(%{dt | minute: 0, second: 0}, 3600), n + 1)

      dt.minute not in c.m ->
        search(c, NaiveDateTime.add(%{dt | second: 0}, 60), n + 1)

      dt.second not in c.s ->
        search(c, NaiveDateTime.add(dt, 1), n + 1)

      true ->
        {:ok, DateTime.from_naive!(dt, "Etc/UTC") |> DateTime.to_unix(:millisecond)}
    end
  end

  defp day_ok?(c, dt) do
    dom = dt.day in c.dom
    # Date.day_of_week: 1 Monday .. 7 Sunday; cron: 0 Sunday .. 6 Saturday.
    dow = rem(Date.day_of_week(dt), 7) in c.dow

    cond do
      c.dom_star and c.dow_star -> true
      c.dom_star -> dow
      c.dow_star -> dom
      true -> dom or dow
    end
  end
end
