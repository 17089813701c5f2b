defmodule EchoMQ.Test.RedisServer do
  @moduledoc false
  # A redis-server of the test's own on a free port (never 6379). It runs under `sh` behind a
  # port: when the owner exits, or the whole BEAM does, the port's stdin closes, `read` returns
  # and the server is killed, so no redis-server outlives the test run.

  def start do
    port = free_port()

    exe =
      System.find_executable("redis-server") ||
        raise "redis-server is not installed (apt-get install redis-server)"

    owner = self()

    script =
      "#{exe} --port #{port} --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & " <>
        "pid=$!; echo $pid; read _; kill -9 $pid"

    watcher =
      spawn(fn ->
        p = Port.open({:spawn_executable, "/bin/sh"}, [:binary, :exit_status, args: ["-c", script]])

        os_pid =
          receive do
            {^p, {:data, line}} -> line |> String.trim() |> String.to_integer()
          end

        ref = Process.monitor(owner)
        send(owner, {:redis_started, self(), os_pid})

        receive do
          {:DOWN, ^ref, _, _, _} -> Port.close(p)
          :stop -> Port.close(p)
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
