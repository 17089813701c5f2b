defmodule EchoMQ.Backoff do
  @moduledoc """
  A retry delay as a pure function of `(policy, attempts)`: computed above the wire and handed to
  `fail` as its `delay_ms` (SPEC 19.7), so a retry cadence is testable without sleeping.

  Policies: `{:fixed, ms}`, `{:exponential, base, cap}` (base * 2^(attempts-1), clamped at cap),
  `{:jitter, inner}` (a uniform draw in `0..delay_ms(inner, attempts)`).

      iex> EchoMQ.Backoff.delay_ms({:exponential, 100, 10_000}, 1)
      100
      iex> EchoMQ.Backoff.delay_ms({:exponential, 100, 10_000}, 3)
      400
      iex> EchoMQ.Backoff.delay_ms({:exponential, 100, 10_000}, 20)
      10000
      iex> EchoMQ.Backoff.delay_ms({:fixed, 30}, 5)
      30
  """

  @type policy ::
          {:fixed, non_neg_integer()}
          | {:exponential, pos_integer(), pos_integer()}
          | {:jitter, policy()}

  @doc "The delay in ms before the retry that follows attempt number `attempts` (1-based)."
  @spec delay_ms(policy(), pos_integer()) :: non_neg_integer()
  def delay_ms({:fixed, ms}, attempts)
      when is_integer(ms) and ms >= 0 and is_integer(attempts) and attempts >= 1,
      do: ms

  def delay_ms({:exponential, base, cap}, attempts)
      when is_integer(base) and base >= 1 and is_integer(cap) and cap >= 1 and
             is_integer(attempts) and attempts >= 1 do
    # The shift is exact-integer; the cap holds the curve from climbing past the ceiling.
    min(base * Bitwise.bsl(1, attempts - 1), cap)
  end

  def delay_ms({:jitter, inner}, attempts) when is_integer(attempts) and attempts >= 1 do
    bound = delay_ms(inner, attempts)
    if bound <= 0, do: 0, else: :rand.uniform(bound + 1) - 1
  end

  def delay_ms(policy, attempts) do
    raise ArgumentError,
          "EchoMQ.Backoff.delay_ms/2: #{inspect(policy)} with attempts #{inspect(attempts)} is not " <>
            "a policy it knows: give {:fixed, ms >= 0}, {:exponential, base >= 1, cap >= 1} or " <>
            "{:jitter, policy}, and attempts >= 1"
  end

  @doc """
  The policy as the wire's JSON object (SPEC 5.1): `{"kind":"fixed","ms":..}`,
  `{"kind":"exponential","base":..,"cap":..}`, `{"kind":"jitter","inner":{..}}`.
  """
  def to_map({:fixed, ms}), do: %{"kind" => "fixed", "ms" => ms}
  def to_map({:exponential, base, cap}), do: %{"kind" => "exponential", "base" => base, "cap" => cap}
  def to_map({:jitter, inner}), do: %{"kind" => "jitter", "inner" => to_map(inner)}

  @doc "The policy a row's backoff JSON object stands for (`{:error, why}` for one it does not know)."
  def from_map(%{"kind" => "fixed", "ms" => ms}) when is_integer(ms) and ms >= 0, do: {:ok, {:fixed, ms}}

  def from_map(%{"kind" => "exponential", "base" => b} = m) when is_integer(b) and b >= 1,
    do: {:ok, {:exponential, b, Map.get(m, "cap", 300_000)}}

  def from_map(%{"kind" => "jitter", "inner" => inner}) do
    with {:ok, p} <- from_map(inner), do: {:ok, {:jitter, p}}
  end

  def from_map(other), do: {:error, "not a backoff policy: #{inspect(other)}"}

  @doc "The default when a job has none (SPEC 25.1)."
  def default, do: {:exponential, 1000, 300_000}
end
