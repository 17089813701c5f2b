defmodule EchoMQ.BackoffTest do
  use ExUnit.Case, async: true
  doctest EchoMQ.Backoff

  alias EchoMQ.Backoff

  test "exponential doubles per attempt and never passes its cap" do
    delays = for a <- 1..12, do: Backoff.delay_ms({:exponential, 100, 10_000}, a)
    assert Enum.take(delays, 4) == [100, 200, 400, 800]
    assert Enum.all?(delays, &(&1 <= 10_000))
    assert delays == Enum.sort(delays)
  end

  test "jitter stays within 0 and its inner policy's delay" do
    for a <- 1..8, _ <- 1..50 do
      d = Backoff.delay_ms({:jitter, {:exponential, 100, 1_000}}, a)
      assert d >= 0 and d <= Backoff.delay_ms({:exponential, 100, 1_000}, a)
    end
  end

  test "an unknown policy or attempt 0 is refused saying what to give" do
    assert_raise ArgumentError, ~r/not a policy it knows/, fn -> Backoff.delay_ms({:linear, 5}, 1) end
    assert_raise ArgumentError, ~r/attempts >= 1/, fn -> Backoff.delay_ms({:fixed, 5}, 0) end
  end
end
