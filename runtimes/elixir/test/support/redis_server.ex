defmodule EchoMQ.Test.RedisServer do
  @moduledoc false
  # A redis-server of the test's own on a free port (never 6379), killed when the owner exits:
  # the server runs under a port, and a watcher process shuts it down by its OS pid.

  def start do
    port = free_port()

    exe =
      System.find_executable("redis-server") ||
        raise "redis-server is not installed (apt-get install redis-server)"

    owner = self()

    watcher =
      spawn(fn ->
        p =
          Port.open({:spawn_executable, exe}, [
            :binary,
            :exit_status,
            args: [
              "--port",
              Integer.to_string(port),
              "--bind",
              "127.0.0.1",
              "--save",
              "",
              "--appendonly",
              "no"
            ]
          ])

        {:os_pid, os_pid} = Port.info(p, :os_pid)
        ref = Process.monitor(owner)
        send(owner, {:redis_started, self(), os_pid})

        receive do
          {:DOWN, ^ref, _, _, _} -> System.cmd("kill", ["-9", Integer.to_string(os_pid)])
          :stop -> System.cmd("kill", ["-9", Integer.to_string(os_pid)])
        end
      end)

    os_pid =
      receive do
        {:redis_started, ^watcher, os_pid} -> os_pid
      after
        5_000 -> raise "redis-server did not start"
      end

    wait_up(port, 100)
    %{port: port, url: "redis://127.0.0.1:#{port}", watcher: watcher, os_pid: os_pid}
  end

  def stop(%{watcher: w}), do: send(w, :stop)

  defp wait_up(_port, 0), do: raise("redis-server did not answer")

  defp wait_up(port, n) do
    case :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false], 200) do
      {:ok, s} ->
        :gen_tcp.close(s)

      _ ->
        Process.sleep(50)
        wait_up(port, n - 1)
    end
  end

  defp free_port do
    {:ok, s} = :gen_tcp.listen(0, [:binary, ip: {127, 0, 0, 1}])
    {:ok, port} = :inet.port(s)
    :gen_tcp.close(s)
    port
  end
end
