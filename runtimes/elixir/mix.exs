defmodule EchoMQ.MixProject do
  use Mix.Project

  # eredis comes from Debian's erlang-redis-client (/usr/lib/erlang/lib/redis_client-*/ebin,
  # app name eredis), already on the code path of the system Erlang: no Hex, no network, so no
  # deps here.
  def project do
    [
      app: :echo_mq,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: if(Mix.env() == :test, do: ["lib", "test/support"], else: ["lib"]),
      deps: []
    ]
  end

  # No application callback: EchoMQ-Elixir ships no supervision tree of its own (the seeds).
  def application, do: [extra_applications: [:logger, :crypto, :eredis]]
end
