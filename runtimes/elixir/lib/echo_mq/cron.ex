defmodule EchoMQ.Cron do
  @moduledoc """
  Cron patterns as the TypeScript runtime reads them (croner 10 in mode `5-or-6-parts`, the
  reference; the Go runtime's cron.go reads them the same way): 5 fields (minute hour
  day-of-month month day-of-week) or 6 (seconds first); `*`, `?`, `N`, `A-B`, `*/S`, `A-B/S`
  and comma lists; month and weekday names in any case (`JAN`, `mon`); day-of-week 0-7 (0 and 7
  Sunday); the nicknames `@yearly` `@annually` `@monthly` `@weekly` `@daily` `@midnight`
  `@hourly`; and croner's extensions: in the day of month `L` (the last day, also beside other
  days as `1,L`), `LW` (the last weekday) and `15W` (the weekday nearest the 15th, never in
  another month); in the day of week `5#2` (the second Friday) and `5#L` or `5L` (the last
  Friday of the month), and a `+` before it for AND.

  Croner's rule for the two day fields is kept: they are OR'd unless one of them is literally
  `*` (so `0 0 ? * MON` runs daily, as croner runs it) or the day of week starts with `+`.
  UTC only: a time zone is refused by `EchoMQ.JobScheduler`, and a scheduler of another runtime
  using one is left to that runtime. A pattern this module cannot read, or one that never
  matches a date, is `{:error, {:cron, why}}`.

      iex> EchoMQ.Cron.next("0 9 * * *", 1_700_000_000_000)
      {:ok, 1_700_038_800_000}

      iex> EchoMQ.Cron.next("0 9 * * FRI#L", 1_775_001_600_000)
      {:ok, 1_777_021_200_000}
  """

  @nicknames %{
    "@yearly" => "0 0 1 1 *",
    "@annually" => "0 0 1 1 *",
    "@monthly" => "0 0 1 * *",
    "@weekly" => "0 0 * * 0",
    "@daily" => "0 0 * * *",
    "@midnight" => "0 0 * * *",
    "@hourly" => "0 * * * *"
  }
  @months ~w(JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC)
  @days ~w(SUN MON TUE WED THU FRI SAT)

  # Day-of-week occurrence bits, croner's: bit n-1 for `#n` (1..5), @last for `#L`, and every
  # bit for a plain weekday (any occurrence).
  @last 32
  @any 63

  @doc "The first instant (epoch ms, a whole second) strictly after `after_ms` the pattern allows."
  @spec next(String.t(), integer()) :: {:ok, integer()} | {:error, {:cron, String.t()}}
  def next(pattern, after_ms) do
    with {:ok, c} <- parse(pattern) do
      search(c, after_ms)
    end
  end

  @doc "Parses a pattern into its field sets; `{:error, {:cron, why}}` for one it cannot read."
  def parse(pattern) when is_binary(pattern) do
    text = String.trim(pattern)
    text = Map.get(@nicknames, String.downcase(text), text)

    with {:ok, [s, m, h, dom, mon, dow]} <- six_fields(pattern, String.split(text)),
         {dom, last_day, last_weekday} = last_day_rule(dom),
         {dow, and_weekday} = and_rule(dow),
         :ok <- if(dow == "", do: bad(pattern, "the day-of-week field is empty after '+'"), else: :ok),
         {:ok, s} <- field(pattern, "second", s, 0, 59, []),
         {:ok, m} <- field(pattern, "minute", m, 0, 59, []),
         {:ok, h} <- field(pattern, "hour", h, 0, 23, []),
         {:ok, days} <- day_field(pattern, dom, last_day or last_weekday),
         {:ok, mon} <- field(pattern, "month", mon, 1, 12, @months, 1),
         {:ok, wd} <- field(pattern, "day-of-week", dow, 0, 7, @days) do
      weekdays =
        Enum.reduce(wd, %{}, fn {v, bits}, acc ->
          v = rem(v, 7)
          Map.update(acc, v, bits, &if(bits == @any, do: @any, else: Bitwise.bor(&1, bits)))
        end)

      c = %{
        s: values(s),
        m: values(m),
        h: values(h),
        dom: values(for {v, :day} <- days, do: {v, :day}),
        nearest: values(for {v, :nearest} <- days, do: {v, :nearest}),
        last_day: last_day,
        last_weekday: last_weekday,
        mon: values(mon),
        dow: weekdays,
        dom_star: dom == "*",
        dow_star: dow == "*",
        and_weekday: and_weekday,
        pattern: pattern
      }

      case search(c, 0) do
        {:ok, _} -> {:ok, c}
        _ -> bad(pattern, "it never matches a date")
      end
    end
  end

  defp six_fields(_, [_, _, _, _, _] = five), do: {:ok, ["0" | five]}
  defp six_fields(_, [_, _, _, _, _, _] = six), do: {:ok, six}

  defp six_fields(pattern, fields),
    do:
      bad(
        pattern,
        "it has #{length(fields)} fields, 5 or 6 expected (minute hour day month weekday, seconds first when 6)"
      )

  # `LW` is the whole field; any other `L` is taken out, leaving the days beside it.
  defp last_day_rule(dom) do
    cond do
      String.upcase(dom) == "LW" -> {"", false, true}
      String.contains?(dom, ["L", "l"]) -> {String.replace(dom, ["L", "l"], ""), true, false}
      true -> {dom, false, false}
    end
  end

  defp and_rule("+" <> dow), do: {dow, true}
  defp and_rule(dow), do: {dow, false}

  defp day_field(pattern, dom, last_rule) do
    # Croner reads `1,L` as day 1 or the last day: the entry L leaves empty is dropped.
    dom = if last_rule, do: dom |> String.replace(",,", ",") |> String.trim(","), else: dom

    if dom == "" and last_rule,
      do: {:ok, []},
      else: field(pattern, "day-of-month", dom, 1, 31, [])
  end

  defp values(pairs), do: MapSet.new(pairs, fn {v, _} -> v end)

  defp bad(pattern, why), do: {:error, {:cron, "#{inspect(pattern)} is not a cron pattern read here: #{why}"}}

  # A field's {value, tag} pairs: tag `@any` or occurrence bits in the day of week, `:nearest`
  # for a `W` day, `:day` for any other day of month, `:v` elsewhere.
  defp field(pattern, name, text, lo, hi, names, names_lo \\ 0) do
    text = String.replace(text, "?", "*")
    upper = String.upcase(text)

    upper =
      names
      |> Enum.with_index(names_lo)
      |> Enum.reduce(upper, fn {n, i}, acc -> String.replace(acc, n, Integer.to_string(i)) end)

    letters =
      case name do
        "day-of-month" -> "W"
        "day-of-week" -> "L#"
        _ -> ""
      end

    cond do
      text == "" ->
        bad(pattern, "the #{name} field is empty")

      String.match?(upper, ~r/[^0-9*\/,\-#{Regex.escape(letters)}]/) ->
        bad(pattern, "the #{name} field #{inspect(text)} has a character it does not take")

      true ->
        upper
        |> String.split(",")
        |> Enum.reduce_while({:ok, []}, fn part, {:ok, acc} ->
          case entry(pattern, name, part, lo, hi) do
            {:ok, pairs} -> {:cont, {:ok, acc ++ pairs}}
            err -> {:halt, err}
          end
        end)
    end
  end

  defp entry(pattern, name, "", _, _), do: bad(pattern, "the #{name} field has an empty list entry")

  defp entry(pattern, name, part, lo, hi) do
    with {:ok, part, tag} <- modifier(pattern, name, part),
         :ok <-
           if(String.contains?(part, ["L", "#", "W"]),
             do:
               bad(pattern, "the #{name} field has #{inspect(part)}: L, W and # go at the end of one entry"),
             else: :ok
           ),
         {:ok, from, to, step} <- range(pattern, name, part, lo, hi) do
      {:ok, for(v <- Enum.take_every(from..to, step), do: {v, tag})}
    end
  end

  defp modifier(pattern, name, part) do
    cond do
      String.contains?(part, "#") ->
        [p, which] = String.split(part, "#", parts: 2)

        case which do
          "L" ->
            {:ok, p, @last}

          n when n in ~w(1 2 3 4 5) ->
            {:ok, p, Bitwise.bsl(1, String.to_integer(n) - 1)}

          _ ->
            bad(
              pattern,
              "the #{name} field's #{inspect(part)} wants 1-5 or L after '#' (the nth weekday of the month)"
            )
        end

      String.ends_with?(part, "L") ->
        {:ok, String.trim_trailing(part, "L"), @last}

      String.ends_with?(part, "W") ->
        if String.contains?(part, ["-", "/"]),
          do:
            bad(
              pattern,
              "the #{name} field's #{inspect(part)}: W (the nearest weekday) takes one day, not a range or a step"
            ),
          else: {:ok, String.trim_trailing(part, "W"), :nearest}

      name == "day-of-week" ->
        {:ok, part, @any}

      name == "day-of-month" ->
        {:ok, part, :day}

      true ->
        {:ok, part, :v}
    end
  end

  defp range(pattern, name, part, lo, hi) do
    {range, step} =
      case String.split(part, "/") do
        [r] -> {r, 1}
        [r, s] -> {r, int(s)}
        _ -> {nil, nil}
      end

    hi_star = if name == "day-of-week", do: 6, else: hi

    cond do
      not is_integer(step) or step < 1 ->
        bad(pattern, "the #{name} field has an illegal step in #{inspect(part)}")

      range != "*" and step > 1 and not String.contains?(range, "-") ->
        bad(pattern, "stepping with a numeric prefix (#{part}) is not allowed; use */step or min-max/step")

      range == "*" ->
        {:ok, lo, hi_star, step}

      true ->
        {a, b} =
          case String.split(range, "-") do
            [n] -> {int(n), int(n)}
            [x, y] -> {int(x), int(y)}
            _ -> {nil, nil}
          end

        cond do
          not (is_integer(a) and is_integer(b)) ->
            bad(pattern, "the #{name} field has #{inspect(part)}, not a number")

          a < lo or b > hi ->
            bad(pattern, "the #{name} field has #{inspect(part)}, outside #{lo}-#{hi}")

          a > b ->
            bad(pattern, "the #{name} field's range #{part} runs backwards")

          true ->
            {:ok, a, b, step}
        end
    end
  end

  defp int(s) do
    case Integer.parse(s) do
      {n, ""} -> n
      _ -> nil
    end
  end

  # Field by field, coarse to fine, from the whole second after `after_ms`: a month that does
  # not match jumps to the next month's start, a day to the next day, and so on; a pattern with
  # no match within 30 years has none (every pattern repeats within 28).
  defp search(c, after_ms) do
    start = NaiveDateTime.add(~N[1970-01-01 00:00:00], Integer.floor_div(after_ms, 1000) + 1)
    step(c, start, start.year + 30)
  end

  defp step(_c, dt, limit) when dt.year > limit, do: {:error, {:cron, "no instant within 30 years matches"}}

  defp step(c, dt, limit) do
    cond do
      dt.month not in c.mon ->
        {y, m} = if dt.month == 12, do: {dt.year + 1, 1}, else: {dt.year, dt.month + 1}
        step(c, NaiveDateTime.new!(y, m, 1, 0, 0, 0), limit)

      not day_ok?(c, dt) ->
        step(c, NaiveDateTime.add(NaiveDateTime.new!(NaiveDateTime.to_date(dt), ~T[00:00:00]), 86_400), limit)

      dt.hour not in c.h ->
        step(c, NaiveDateTime.add(%{dt | minute: 0, second: 0}, 3600), limit)

      dt.minute not in c.m ->
        step(c, NaiveDateTime.add(%{dt | second: 0}, 60), limit)

      dt.second not in c.s ->
        step(c, NaiveDateTime.add(dt, 1), limit)

      true ->
        {:ok, DateTime.from_naive!(dt, "Etc/UTC") |> DateTime.to_unix(:millisecond)}
    end
  end

  # Croner's rule: the weekday alone when it is `*`, AND when the day of month is `*` (or `+`
  # asked for it), else OR.
  defp day_ok?(c, dt) do
    dom = dom_ok?(c, dt)

    cond do
      c.dow_star -> dom
      c.and_weekday or c.dom_star -> dom and weekday_ok?(c, dt)
      true -> dom or weekday_ok?(c, dt)
    end
  end

  defp dom_ok?(c, dt) do
    last = Date.days_in_month(dt)

    dt.day in c.dom or (c.last_day and dt.day == last) or
      (c.last_weekday and dt.day == last_weekday(dt, last)) or
      Enum.any?(c.nearest, &(nearest_weekday(dt, &1, last) == dt.day))
  end

  defp weekday_ok?(c, dt) do
    # Date.day_of_week: 1 Monday .. 7 Sunday; cron: 0 Sunday .. 6 Saturday.
    bits = Map.get(c.dow, rem(Date.day_of_week(dt), 7), 0)
    nth = div(dt.day - 1, 7) + 1

    cond do
      bits == 0 -> false
      bits == @any -> true
      Bitwise.band(bits, Bitwise.bsl(1, nth - 1)) != 0 -> true
      true -> Bitwise.band(bits, @last) != 0 and dt.day + 7 > Date.days_in_month(dt)
    end
  end

  # The month's last Monday-to-Friday day (`LW`).
  defp last_weekday(dt, last) do
    case Date.day_of_week(%{NaiveDateTime.to_date(dt) | day: last}) do
      7 -> last - 2
      6 -> last - 1
      _ -> last
    end
  end

  # The weekday nearest day n of the month (`nW`), never in another month; 0 when the month has
  # no day n.
  defp nearest_weekday(_dt, n, last) when n > last, do: 0

  defp nearest_weekday(dt, n, last) do
    case Date.day_of_week(%{NaiveDateTime.to_date(dt) | day: n}) do
      7 -> if n == last, do: n - 2, else: n + 1
      6 -> if n == 1, do: n + 2, else: n - 1
      _ -> n
    end
  end
end
