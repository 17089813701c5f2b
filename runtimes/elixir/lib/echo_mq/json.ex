defmodule EchoMQ.JSON do
  @moduledoc """
  The JSON the wire carries (payloads, results, progress, backoff, heartbeat info; SPEC 5.1).
  Elixir 1.14 and OTP 25 have no JSON module and Hex is not reachable, so this is a small
  RFC 8259 codec: objects decode to maps with string keys, `null` to `nil`, numbers to integers
  or floats.

      iex> EchoMQ.JSON.decode!(~s({"a":[1,2.5,"x\\u00fc"],"b":null,"c":true}))
      %{"a" => [1, 2.5, "xü"], "b" => nil, "c" => true}
      iex> EchoMQ.JSON.encode!(%{"kind" => "fixed", "ms" => 30})
      ~s({"kind":"fixed","ms":30})
  """

  @doc "Encodes a term: maps (atom or string keys), lists, binaries, numbers, booleans, nil, atoms."
  @spec encode!(term()) :: binary()
  def encode!(value), do: IO.iodata_to_binary(enc(value))

  @doc "Decodes JSON text; `{:error, reason}` when it is not JSON."
  @spec decode(binary()) :: {:ok, term()} | {:error, String.t()}
  def decode(text) when is_binary(text) do
    {value, rest} = value(skip(text))

    case skip(rest) do
      "" -> {:ok, value}
      more -> {:error, "unexpected text after the JSON value: #{inspect(String.slice(more, 0, 20))}"}
    end
  catch
    {:json, reason} -> {:error, reason}
  end

  @doc "Decodes JSON text, raising ArgumentError when it is not JSON."
  @spec decode!(binary()) :: term()
  def decode!(text) do
    case decode(text) do
      {:ok, v} -> v
      {:error, reason} -> raise ArgumentError, "not JSON (#{reason}): #{inspect(String.slice(text, 0, 60))}"
    end
  end

  defp enc(nil), do: "null"
  defp enc(true), do: "true"
  defp enc(false), do: "false"
  defp enc(v) when is_atom(v), do: enc(Atom.to_string(v))
  defp enc(v) when is_integer(v), do: Integer.to_string(v)
  defp enc(v) when is_float(v), do: :erlang.float_to_binary(v, [:short])
  defp enc(v) when is_binary(v), do: [?", escape(v, []), ?"]
  defp enc(v) when is_list(v), do: [?[, Enum.intersperse(Enum.map(v, &enc/1), ?,), ?]]

  defp enc(%{} = m) when not is_struct(m) do
    pairs = Enum.map(m, fn {k, v} -> [enc(to_string(k)), ?:, enc(v)] end)
    [?{, Enum.intersperse(pairs, ?,), ?}]
  end

  defp enc(v),
    do:
      raise(
        ArgumentError,
        "EchoMQ.JSON cannot encode #{inspect(v)}: give maps, lists, strings, numbers, booleans or nil"
      )

  defp escape(<<>>, acc), do: Enum.reverse(acc)
  defp escape(<<?", r::binary>>, acc), do: escape(r, ["\\\"" | acc])
  defp escape(<<?\\, r::binary>>, acc), do: escape(r, ["\\\\" | acc])
  defp escape(<<?\n, r::binary>>, acc), do: escape(r, ["\\n" | acc])
  defp escape(<<?\r, r::binary>>, acc), do: escape(r, ["\\r" | acc])
  defp escape(<<?\t, r::binary>>, acc), do: escape(r, ["\\t" | acc])

  defp escape(<<c, r::binary>>, acc) when c < 0x20,
    do: escape(r, [:io_lib.format("\\u~4.16.0b", [c]) | acc])

  defp escape(<<c, r::binary>>, acc), do: escape(r, [c | acc])

  defp skip(<<c, r::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: skip(r)
  defp skip(r), do: r

  defp value(<<?{, r::binary>>), do: object(skip(r), %{})
  defp value(<<?[, r::binary>>), do: array(skip(r), [])
  defp value(<<?", r::binary>>), do: string(r, [])
  defp value(<<"true", r::binary>>), do: {true, r}
  defp value(<<"false", r::binary>>), do: {false, r}
  defp value(<<"null", r::binary>>), do: {nil, r}
  defp value(<<c, _::binary>> = r) when c == ?- or c in ?0..?9, do: number(r)
  defp value(""), do: throw({:json, "unexpected end of text"})
  defp value(<<c::utf8, _::binary>>), do: throw({:json, "unexpected character #{<<c::utf8>>}"})
  defp value(_), do: throw({:json, "not UTF-8"})

  defp object(<<?}, r::binary>>, acc), do: {acc, r}

  defp object(<<?", r::binary>>, acc) do
    {k, r} = string(r, [])

    case skip(r) do
      <<?:, r::binary>> ->
        {v, r} = value(skip(r))
        acc = Map.put(acc, k, v)

        case skip(r) do
          <<?,, r::binary>> -> object(skip(r), acc)
          <<?}, r::binary>> -> {acc, r}
          _ -> throw({:json, "expected , or } in an object"})
        end

      _ ->
        throw({:json, "expected : after an object key"})
    end
  end

  defp object(_, _), do: throw({:json, "expected a string key in an object"})

  defp array(<<?], r::binary>>, acc), do: {Enum.reverse(acc), r}

  defp array(r, acc) do
    {v, r} = value(r)

    case skip(r) do
      <<?,, r::binary>> -> array(skip(r), [v | acc])
      <<?], r::binary>> -> {Enum.reverse([v | acc]), r}
      _ -> throw({:json, "expected , or ] in an array"})
    end
  end

  defp string(<<?", r::binary>>, acc), do: {IO.iodata_to_binary(Enum.reverse(acc)), r}

  defp string(<<?\\, ?u, h::binary-size(4), ?\\, ?u, l::binary-size(4), r::binary>> = all, acc) do
    hi = hex(h)
    lo = hex(l)

    if hi in 0xD800..0xDBFF and lo in 0xDC00..0xDFFF do
      cp = 0x10000 + Bitwise.bsl(hi - 0xD800, 10) + (lo - 0xDC00)
      string(r, [<<cp::utf8>> | acc])
    else
      <<_::binary-size(6), rest::binary>> = all
      string(rest, [codepoint(hi) | acc])
    end
  end

  defp string(<<?\\, ?u, h::binary-size(4), r::binary>>, acc), do: string(r, [codepoint(hex(h)) | acc])
  defp string(<<?\\, c, r::binary>>, acc), do: string(r, [unescape(c) | acc])
  defp string(<<c, r::binary>>, acc) when c >= 0x20, do: string(r, [c | acc])
  defp string(_, _), do: throw({:json, "unterminated string or control character in a string"})

  defp unescape(?"), do: ?"
  defp unescape(?\\), do: ?\\
  defp unescape(?/), do: ?/
  defp unescape(?b), do: ?\b
  defp unescape(?f), do: ?\f
  defp unescape(?n), do: ?\n
  defp unescape(?r), do: ?\r
  defp unescape(?t), do: ?\t
  defp unescape(c), do: throw({:json, "unknown escape \\#{<<c>>}"})

  defp hex(h) do
    case Integer.parse(h, 16) do
      {n, ""} -> n
      _ -> throw({:json, "bad \\u escape #{h}"})
    end
  end

  # A lone surrogate is kept as U+FFFD: Elixir binaries hold UTF-8, which cannot encode one.
  defp codepoint(n) when n in 0xD800..0xDFFF, do: <<0xFFFD::utf8>>
  defp codepoint(n), do: <<n::utf8>>

  defp number(r) do
    {text, rest} = take_number(r, [])

    cond do
      text =~ ~r/^-?(0|[1-9]\d*)$/ ->
        {String.to_integer(text), rest}

      text =~ ~r/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/ ->
        # "1e5" has no fraction; Float.parse reads it, String.to_float would not.
        {f, ""} = Float.parse(text)
        {f, rest}

      true ->
        throw({:json, "bad number #{text}"})
    end
  end

  defp take_number(<<c, r::binary>>, acc) when c in ?0..?9 or c in [?-, ?+, ?., ?e, ?E],
    do: take_number(r, [c | acc])

  defp take_number(r, acc), do: {acc |> Enum.reverse() |> IO.iodata_to_binary(), r}
end
