defmodule EchoMQ.Ids do
  @moduledoc """
  Job ids (SPEC 3): `JOB`, 10 Crockford base32 characters of the mint instant (epoch ms, 48
  bits) and 10 of randomness. Minting is monotonic per calling process (the last id lives in
  the process dictionary): within one ms, or when the clock steps back, the random part counts
  up by one, so one process's ids sort in mint order.
  """
  import Bitwise

  @alphabet ~c"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
  @max_time (1 <<< 48) - 1
  @max_rand (1 <<< 50) - 1

  @doc "Mints a job id."
  @spec mint() :: String.t()
  def mint do
    now = System.system_time(:millisecond)

    {t, r} =
      case Process.get(:echo_mq_last_id) do
        {lt, lr} when now <= lt and lr < @max_rand -> {lt, lr + 1}
        {lt, _} when now <= lt -> {lt + 1, fresh()}
        _ -> {now, fresh()}
      end

    if t > @max_time,
      do: raise(ArgumentError, "EchoMQ.Ids.mint: the clock is past 2^48 ms; ids cannot encode it")

    Process.put(:echo_mq_last_id, {t, r})
    "JOB" <> encode(t, 10) <> encode(r, 10)
  end

  @doc "The mint instant a minted id holds (0 for an id of another shape)."
  @spec minted_at(String.t()) :: non_neg_integer()
  def minted_at(<<"JOB", time::binary-size(10), _rand::binary-size(10)>> = id) do
    if Enum.all?(String.to_charlist(binary_part(id, 3, 20)), &(&1 in @alphabet)),
      do: decode(time),
      else: 0
  end

  def minted_at(_), do: 0

  @doc "The 10-character time part of an instant, as in occurrence ids."
  def encode(n, width) do
    for i <- (width - 1)..0//-1, into: "", do: <<Enum.at(@alphabet, n >>> (5 * i) &&& 31)>>
  end

  defp decode(text),
    do: Enum.reduce(String.to_charlist(text), 0, &(&2 * 32 + Enum.find_index(@alphabet, fn c -> c == &1 end)))

  # 256 is a multiple of 32: the low 5 bits of a uniform byte are uniform (as TypeScript does).
  defp fresh do
    for <<b <- :crypto.strong_rand_bytes(10)>>, reduce: 0, do: (acc -> acc <<< 5 ||| (b &&& 31))
  end

  @doc """
  Checks a caller's id (SPEC 25.1): `JOB`-prefixed, 4 to 512 characters, no whitespace or
  control characters.
  """
  @spec check(term()) :: :ok | {:error, :kind}
  def check(id) when is_binary(id) do
    if String.starts_with?(id, "JOB") and byte_size(id) in 4..512 and String.valid?(id) and
         not (id =~ ~r/[\s[:cntrl:]]/u),
       do: :ok,
       else: {:error, :kind}
  end

  def check(_), do: {:error, :kind}
end
