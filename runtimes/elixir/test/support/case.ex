defmodule EchoMQ.Test.ServerCase do
  @moduledoc false
  # A redis-server per test module (started in setup_all, killed with the module's process),
  # and a flushed database and fresh connector per test.
  use ExUnit.CaseTemplate

  using do
    quote do
      alias EchoMQ.{Connector, Jobs, JSON}
    end
  end

  setup_all do
    server = EchoMQ.Test.RedisServer.start()
    on_exit(fn -> EchoMQ.Test.RedisServer.stop(server) end)
    {:ok, server: server}
  end

  setup %{server: server} do
    conn = EchoMQ.Connector.connect!(url: server.url)
    {:ok, _} = EchoMQ.Connector.command(conn, ["FLUSHALL"])
    {:ok, conn: conn, url: server.url}
  end
end
