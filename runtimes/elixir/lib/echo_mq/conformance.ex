defmodule EchoMQ.Conformance do
  @moduledoc """
  The conformance replayer (SPEC 23, protocol/conformance/README.md): every case of
  `protocol/conformance/*.json` replayed with this runtime's script loader and Redis client,
  compared with what the case expects. Setup and the key checks go through eredis; the script
  call itself through `EchoMQ.Connector.typed_eval/4`, since a case tells `1` from `"1"` and
  eredis gives both as text.
  """

  alias EchoMQ.{Connector, JSON}

  @tolerance_ms 5000

  @doc "The conformance directory: beside the scripts directory."
  def dir(opts \\ []),
    do: opts[:conformance_dir] || Path.join(Path.dirname(EchoMQ.Script.dir(opts)), "conformance")

  @doc "Every case file of `dir`, sorted by name: `[%{\"script\" => .., \"cases\" => [..]}]`."
  def load(dir) do
    dir |> Path.join("*.json") |> Path.wildcard() |> Enum.sort() |> Enum.map(&JSON.decode!(File.read!(&1)))
  end

  @doc """
  Replays every case; `%{passed: n, total: n, failures: [\"file: case: problem\"]}`.
  The database of `conn` is flushed before each case.
  """
  def replay_all(conn, dir \\ dir()) do
    results =
      for file <- load(dir), c <- file["cases"] do
        case replay(conn, c) do
          {:ok, []} -> :pass
          {:ok, problems} -> {:fail, "#{file["script"]}: #{c["name"]}: #{Enum.join(problems, "; ")}"}
          {:error, reason} -> {:fail, "#{file["script"]}: #{c["name"]}: #{inspect(reason)}"}
        end
      end

    failures = for {:fail, f} <- results, do: f
    %{passed: length(results) - length(failures), total: length(results), failures: failures}
  end

  @doc """
  Runs one case and returns every way Redis differs from what it expects (`{:ok, []}`: it
  passes). A case of a later level than `EchoMQ.Jobs.known_level/0` is refused as a problem
  naming both levels, and a placeholder this replayer does not know as an error: neither
  touches Redis (SPEC 22.1, 23).
  """
  def replay(conn, c) do
    level = c["level"] || 1
    known = EchoMQ.Jobs.known_level()
    s = conn.scripts[c["call"]["script"]]

    cond do
      level > known ->
        {:ok, ["the case needs SPEC level #{level}; this replayer knows level #{known} (SPEC 22.2, 23)"]}

      p = unknown_placeholder(c) ->
        {:error,
         "unknown placeholder #{p}: this replayer knows those of SPEC level #{known} " <>
           "($any, $now±N, $now_us, $range:A:B, $$…); a later level's case needs a replayer of that level (SPEC 23)"}

      s == nil ->
        {:ok, ["no script protocol/scripts/#{c["call"]["script"]}.lua"]}

      (problems = keys_follow_contract(c, s)) != [] ->
        {:ok, problems}

      Map.has_key?(c["expect"], "reply") == Map.has_key?(c["expect"], "error") ->
        {:ok, ["expect needs exactly one of reply and error"]}

      true ->
        run_case(conn, c, s)
    end
  end

  defp run_case(conn, c, s) do
    {:ok, _} = Connector.command(conn, ["FLUSHALL"])
    {:ok, [secs, micros]} = Connector.command(conn, ["TIME"])
    now = String.to_integer(secs) * 1000 + div(String.to_integer(micros), 1000)

    setup_problems =
      Enum.flat_map(c["setup"] || [], fn [cmd | args] ->
        case Connector.command(conn, [cmd | Enum.map(args, &setup_arg(&1, now))]) do
          {:ok, _} -> []
          {:error, e} -> ["setup #{inspect([cmd | args])}: #{inspect(e)}"]
        end
      end)

    if setup_problems != [] do
      {:ok, setup_problems}
    else
      events_key = "emq:{#{c["queue"]}}:events"
      {:ok, before} = Connector.command(conn, ["XREVRANGE", events_key, "+", "-", "COUNT", "1"])
      reply = Connector.typed_eval(conn, s, c["call"]["keys"], c["call"]["argv"])
      e = c["expect"]

      reply_problems =
        case {reply, e} do
          {{:error, {:connection, r}}, _} ->
            ["connection: #{inspect(r)}"]

          {{:error, {:server, msg}}, %{"error" => code}} ->
            if msg == code or String.starts_with?(msg, code <> " "),
              do: [],
              else: ["error: expected #{code}, got #{inspect(msg)}"]

          {{:error, {:server, msg}}, %{"reply" => r}} ->
            ["reply: expected #{JSON.encode!(r)}, got error #{inspect(msg)}"]

          {{:ok, v}, %{"error" => code}} ->
            ["error: expected #{code}, got reply #{inspect(v)}"]

          {{:ok, v}, %{"reply" => want}} ->
            compare(want, v, now, "reply")
        end

      key_problems =
        (e["keys"] || %{})
        |> Enum.sort()
        |> Enum.flat_map(fn {k, want} -> compare_key(conn, k, want, now) end)

      start =
        case before do
          [[id, _]] -> "(" <> id
          _ -> "-"
        end

      {:ok, entries} = Connector.command(conn, ["XRANGE", events_key, start, "+"])
      {:ok, reply_problems ++ key_problems ++ compare_events(entries, e["events"] || [], now)}
    end
  end

  defp compare_events(entries, want, now) do
    order =
      for [id, flat] <- entries, not match?(["event", _, "id", _ | _], flat) do
        "event #{id}: the first fields must be event and id, got #{inspect(flat)}"
      end

    if length(entries) != length(want) do
      got = Enum.map(entries, fn [_, flat] -> EchoMQ.Jobs.pairs(flat) end)
      order ++ ["events: expected #{JSON.encode!(want)}, got #{JSON.encode!(got)}"]
    else
      order ++
        (Enum.zip(entries, want)
         |> Enum.with_index()
         |> Enum.flat_map(fn {{[_, flat], fields}, i} ->
           actual = EchoMQ.Jobs.pairs(flat)

           fields
           |> Enum.sort()
           |> Enum.flat_map(fn {f, w} -> compare(w, actual[f], now, "events[#{i}].#{f}") end)
         end))
    end
  end

  defp compare_key(conn, key, "absent", _now) do
    case Connector.command(conn, ["TYPE", key]) do
      {:ok, "none"} -> []
      {:ok, t} -> ["#{key}: expected absent, found a #{t}"]
    end
  end

  defp compare_key(conn, key, %{"type" => type} = want, now) do
    {:ok, t} = Connector.command(conn, ["TYPE", key])

    cond do
      t != type ->
        ["#{key}: expected a #{type}, found #{if t == "none", do: "no key", else: "a " <> t}"]

      type == "hash" ->
        {:ok, flat} = Connector.command(conn, ["HGETALL", key])
        actual = EchoMQ.Jobs.pairs(flat)
        w = want["value"] || %{}

        (Map.keys(actual) ++ Map.keys(w))
        |> Enum.uniq()
        |> Enum.sort()
        |> Enum.flat_map(fn f ->
          case {Map.fetch(actual, f), Map.fetch(w, f)} do
            {:error, {:ok, x}} -> ["#{key} #{f}: expected #{JSON.encode!(x)}, field absent"]
            {{:ok, a}, :error} -> ["#{key} #{f}: unexpected field, value #{inspect(a)}"]
            {{:ok, a}, {:ok, x}} -> compare(x, a, now, "#{key} #{f}")
          end
        end)

      type == "zset" ->
        {:ok, flat} = Connector.command(conn, ["ZRANGE", key, "0", "-1", "WITHSCORES"])
        pairs = Enum.chunk_every(flat, 2)
        w = want["value"] || []

        if length(pairs) != length(w) do
          ["#{key}: expected #{JSON.encode!(w)}, got #{inspect(flat)}"]
        else
          Enum.zip(w, pairs)
          |> Enum.with_index()
          |> Enum.flat_map(fn {{[member, score], [am, as]}, i} ->
            path = "#{key}[#{i}] #{member} score"

            if(am != member, do: ["#{key}[#{i}]: expected member #{member}, got #{am}"], else: []) ++
              cond do
                is_binary(score) and String.starts_with?(score, "$") -> compare(score, as, now, path)
                score_value(score) == score_value(as) -> []
                true -> ["#{path}: expected score #{score}, got #{as}"]
              end
          end)
        end

      type == "set" ->
        {:ok, members} = Connector.command(conn, ["SMEMBERS", key])
        compare(Enum.sort(want["value"] || []), Enum.sort(members), now, key)

      type == "list" ->
        {:ok, items} = Connector.command(conn, ["LRANGE", key, "0", "-1"])
        compare(want["value"] || [], items, now, key)

      type == "string" ->
        {:ok, v} = Connector.command(conn, ["GET", key])
        compare(want["value"], v, now, key)

      type == "stream" ->
        {:ok, len} = Connector.command(conn, ["XLEN", key])
        len = Connector.int(len)

        length_problems =
          if want["length"] && want["length"] != len,
            do: ["#{key}: expected #{want["length"]} entries, got #{len}"],
            else: []

        last_problems =
          case want["last"] do
            nil ->
              []

            last ->
              {:ok, entries} = Connector.command(conn, ["XREVRANGE", key, "+", "-", "COUNT", "1"])

              fields =
                case entries do
                  [[_, flat]] -> EchoMQ.Jobs.pairs(flat)
                  _ -> %{}
                end

              Enum.flat_map(Enum.sort(last), fn {f, w} ->
                compare(w, fields[f], now, "#{key} last entry #{f}")
              end)
          end

        length_problems ++ last_problems

      true ->
        ["#{key}: the case expects a #{type}, a key type this replayer does not know"]
    end
  end

  defp score_value(s) when is_number(s), do: s * 1.0
  defp score_value(s) when s in ["inf", "+inf"], do: :inf
  defp score_value("-inf"), do: :neg_inf

  defp score_value(s) do
    case Float.parse(s) do
      {f, ""} -> f
      _ -> :nan
    end
  end

  # compare: one line per mismatch between an expected JSON value (with placeholders) and an
  # actual typed reply (integer, binary, list or nil).
  defp compare("$" <> _ = p, actual, now, path), do: compare_placeholder(p, actual, now, path)

  defp compare(want, actual, now, path) when is_list(want) do
    if is_list(actual) and length(actual) == length(want) do
      want
      |> Enum.zip(actual)
      |> Enum.with_index()
      |> Enum.flat_map(fn {{w, a}, i} -> compare(w, a, now, "#{path}[#{i}]") end)
    else
      ["#{path}: expected #{JSON.encode!(want)}, got #{inspect(actual)}"]
    end
  end

  defp compare(want, actual, _now, path) when is_integer(want) do
    if is_integer(actual) and actual == want,
      do: [],
      else: ["#{path}: expected #{want}, got #{inspect(actual)}"]
  end

  defp compare(want, actual, _now, path) when is_binary(want) do
    if actual == want, do: [], else: ["#{path}: expected #{inspect(want)}, got #{inspect(actual)}"]
  end

  defp compare(nil, actual, _now, path) do
    if actual == nil, do: [], else: ["#{path}: expected null, got #{inspect(actual)}"]
  end

  defp compare(want, _actual, _now, path),
    do: ["#{path}: an expected reply holds no #{inspect(want)} (Redis replies are scalars and arrays)"]

  defp compare_placeholder("$$" <> rest, actual, _now, path) do
    if actual == "$" <> rest,
      do: [],
      else: ["#{path}: expected #{inspect("$" <> rest)}, got #{inspect(actual)}"]
  end

  defp compare_placeholder("$any", actual, _now, path),
    do: if(actual == nil, do: ["#{path}: expected a value, got null"], else: [])

  defp compare_placeholder(p, actual, now, path) do
    n = as_int(actual)

    case p do
      "$now_us" ->
        target = now * 1000

        if n && abs(n - target) <= @tolerance_ms * 1000,
          do: [],
          else: ["#{path}: expected $now_us (#{target} ± #{@tolerance_ms * 1000} µs), got #{inspect(actual)}"]

      "$range:" <> r ->
        [lo, hi] = r |> String.split(":") |> Enum.map(&String.to_integer/1)

        if n && n >= lo && n <= hi,
          do: [],
          else: ["#{path}: expected an integer in [#{lo}, #{hi}], got #{inspect(actual)}"]

      _ ->
        target = instant(p, now)

        if n && abs(n - target) <= @tolerance_ms,
          do: [],
          else: ["#{path}: expected #{p} (#{target} ± #{@tolerance_ms} ms), got #{inspect(actual)}"]
    end
  end

  defp as_int(n) when is_integer(n), do: n

  defp as_int(s) when is_binary(s) do
    if s =~ ~r/^-?\d+$/, do: String.to_integer(s), else: nil
  end

  defp as_int(_), do: nil

  @now ~r/^\$now(?:([+-])(\d+))?$/

  defp instant(p, now) do
    case Regex.run(@now, p) do
      [_] -> now
      [_, "+", n] -> now + String.to_integer(n)
      [_, "-", n] -> now - String.to_integer(n)
    end
  end

  defp setup_arg("$$" <> rest, _now), do: "$" <> rest
  defp setup_arg("$" <> _ = p, now), do: Integer.to_string(instant(p, now))
  defp setup_arg(a, _now), do: a

  defp known_placeholder?(p) do
    String.starts_with?(p, "$$") or p in ["$any", "$now_us"] or Regex.match?(@now, p) or
      Regex.match?(~r/^\$range:-?\d+:-?\d+$/, p)
  end

  # The first placeholder of a case this replayer does not know, looked for in every string
  # of its setup and expectations before anything runs; nil when there is none.
  defp unknown_placeholder(c) do
    setup = for [_ | args] <- c["setup"] || [], a <- args, do: a
    e = c["expect"]
    Enum.find_value([setup, e["reply"], e["keys"], e["events"]], &walk/1)
  end

  defp walk("$" <> _ = s), do: if(known_placeholder?(s), do: nil, else: s)
  defp walk(l) when is_list(l), do: Enum.find_value(l, &walk/1)
  defp walk(%{} = m), do: Enum.find_value(Map.values(m), &walk/1)
  defp walk(_), do: nil

  # The case's KEYS have the script's `-- KEYS:` names, count and order.
  defp keys_follow_contract(c, s) do
    prefix = "emq:{#{c["queue"]}}:"
    keys = c["call"]["keys"]

    count =
      if length(keys) != length(s.keys),
        do: ["call.keys has #{length(keys)} keys, the contract of #{s.name} lists #{length(s.keys)}"],
        else: []

    count ++
      (s.keys
       |> Enum.with_index()
       |> Enum.flat_map(fn {name, i} ->
         key = Enum.at(keys, i) || ""

         ok =
           if name == "job",
             do: String.starts_with?(key, prefix <> "job:") and byte_size(key) > byte_size(prefix) + 4,
             else: key == prefix <> name

         if ok,
           do: [],
           else: ["KEYS[#{i + 1}] should be the #{name} key under #{prefix}, got #{inspect(key)}"]
       end))
  end
end
