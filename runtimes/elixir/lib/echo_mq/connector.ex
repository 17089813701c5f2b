defmodule EchoMQ.Connector do
  @moduledoc """
  One Redis connection (an eredis client process) and the protocol's scripts.

  * `eval/4` runs a script with EVALSHA and, on `NOSCRIPT` (a new or restarted server), once
    more with EVAL and the body.
  * `pipeline/2` sends several commands in one round trip (`eredis:qp`).
  * `blocking/1` opens a second connection of the same server for `XREAD BLOCK`: a blocked read
    holds its connection, so it must never share the one the verbs use.

  Replies, as eredis gives them: bulk, status **and integer** replies are binaries (eredis
  turns `:1` into `"1"`), arrays lists, nil `nil` (eredis' `:undefined`); an error reply is
  `{:error, {:server, message}}` and a dead or timed-out connection `{:error, {:connection,
  reason}}`. Callers read integers with `int/1`. Where the type itself matters (the conformance
  replay tells `1` from `"1"`), `typed_command/2` reads the reply over a socket of its own with
  a RESP2 parser that keeps integers apart (`EchoMQ.Connector.RESP`).
  """

  alias EchoMQ.Script

  defstruct [
    :client,
    :scripts,
    :host,
    :port,
    :database,
    :password,
    :hellos,
    :protocol_version,
    timeout: 15_000
  ]

  @type t :: %__MODULE__{}
  @type reply :: binary() | integer() | nil | [reply()]
  @type error :: {:error, {:server, binary()} | {:connection, term()}}

  @doc """
  Connects. Options: `url` ("redis://host:port/db") or `host`/`port`/`database`, `password`,
  `scripts_dir` (see `EchoMQ.Script.dir/1`), `timeout` (ms per call, default 15000),
  `protocol_version` (the version hello stamps on a queue that has none: 2 by default, which the
  previous release also speaks; 1 for a fleet that still holds a release speaking 1 only, SPEC
  22.4). The eredis process is linked to the caller.
  """
  @spec connect(keyword()) :: {:ok, t()} | {:error, term()}
  def connect(opts \\ []) do
    {host, port, db} = address(opts)

    with {:ok, version} <- new_queue_version(opts[:protocol_version]),
         {:ok, scripts} <- Script.load(Script.dir(opts)),
         :ok <- reachable(host, port),
         {:ok, client} <- start_client(host, port, db, opts[:password]) do
      {:ok, hellos} = Agent.start_link(fn -> %{} end)

      {:ok,
       %__MODULE__{
         client: client,
         scripts: scripts,
         host: host,
         port: port,
         database: db,
         password: opts[:password],
         hellos: hellos,
         protocol_version: version,
         timeout: opts[:timeout] || 15_000
       }}
    end
  end

  # The version hello stamps on a new queue: the runtime's default, or one it speaks.
  defp new_queue_version(nil), do: {:ok, EchoMQ.Jobs.default_version()}

  defp new_queue_version(v) do
    {lo, hi} = EchoMQ.Jobs.versions()

    if is_integer(v) and v in lo..hi,
      do: {:ok, v},
      else:
        {:error,
         {:input,
          "protocol_version must be one of #{lo}..#{hi} (the versions this runtime speaks), got #{inspect(v)}"}}
  end

  @doc "As `connect/1`, raising on failure."
  def connect!(opts \\ []) do
    case connect(opts) do
      {:ok, c} -> c
      {:error, reason} -> raise ArgumentError, "EchoMQ.Connector: #{inspect(reason)}"
    end
  end

  @doc "Closes the connection (and its hello cache)."
  def close(%__MODULE__{client: c, hellos: h}) do
    _ = safe(fn -> :eredis.stop(c) end)
    _ = safe(fn -> Agent.stop(h) end)
    :ok
  end

  @doc """
  A second connection to the same server, for blocking reads (XREAD BLOCK): the returned
  connector shares the scripts and hello cache but owns its own eredis process.
  """
  @spec blocking(t()) :: {:ok, t()} | {:error, term()}
  def blocking(%__MODULE__{} = c) do
    with {:ok, client} <- start_client(c.host, c.port, c.database, c.password) do
      {:ok, %{c | client: client}}
    end
  end

  @doc "Closes a connection opened by `blocking/1` (not the hello cache it shares)."
  def close_blocking(%__MODULE__{client: client}), do: safe(fn -> :eredis.stop(client) end)

  @doc "Runs one command; `timeout` ms (a blocking read passes its block time plus a margin)."
  @spec command(t(), [iodata() | integer()], timeout() | nil) :: {:ok, reply()} | error()
  def command(%__MODULE__{client: client} = c, args, timeout \\ nil) do
    case safe(fn -> :eredis.q(client, Enum.map(args, &arg/1), timeout || c.timeout) end) do
      {:ok, v} -> {:ok, norm(v)}
      {:error, msg} when is_binary(msg) -> {:error, {:server, msg}}
      {:error, reason} -> {:error, {:connection, reason}}
    end
  end

  @doc "Runs several commands in one round trip; one `{:ok, reply} | {:error, ...}` per command."
  @spec pipeline(t(), [[iodata() | integer()]]) :: [{:ok, reply()} | error()] | error()
  def pipeline(%__MODULE__{client: client} = c, commands) do
    case safe(fn -> :eredis.qp(client, Enum.map(commands, fn a -> Enum.map(a, &arg/1) end), c.timeout) end) do
      replies when is_list(replies) ->
        Enum.map(replies, fn
          {:ok, v} -> {:ok, norm(v)}
          {:error, msg} when is_binary(msg) -> {:error, {:server, msg}}
          {:error, reason} -> {:error, {:connection, reason}}
        end)

      {:error, reason} ->
        {:error, {:connection, reason}}
    end
  end

  @doc "The loaded script of a verb (`\"claim\"` or `:claim`)."
  @spec script(t(), String.t() | atom()) :: Script.t()
  def script(%__MODULE__{scripts: scripts}, verb) do
    Map.get(scripts, to_string(verb)) ||
      raise ArgumentError, "no protocol script #{verb}.lua among #{map_size(scripts)} loaded"
  end

  @doc """
  Runs a script (a `%EchoMQ.Script{}` or a verb name) with EVALSHA, and once more with EVAL and
  the body on NOSCRIPT. Error replies come back as `{:error, {:server, message}}`, unmapped.
  """
  @spec eval(t(), Script.t() | String.t() | atom(), [binary()], [term()]) :: {:ok, reply()} | error()
  def eval(conn, script, keys, argv)
  def eval(conn, %Script{} = s, keys, argv), do: do_eval(conn, s, keys, argv)
  def eval(conn, verb, keys, argv), do: do_eval(conn, script(conn, verb), keys, argv)

  defp do_eval(conn, s, keys, argv) do
    tail = [length(keys) | keys] ++ argv

    case command(conn, ["EVALSHA", s.sha | tail]) do
      {:error, {:server, "NOSCRIPT" <> _}} -> command(conn, ["EVAL", s.body | tail])
      other -> other
    end
  end

  @doc """
  Runs a verb on `queue` with KEYS built from its contract (`job_id` fills the `job` key).
  """
  @spec run(t(), String.t(), String.t() | atom(), String.t() | nil, [term()]) :: {:ok, reply()} | error()
  def run(conn, queue, verb, job_id, argv) do
    s = script(conn, verb)

    keys =
      Enum.map(s.keys, fn
        "job" -> EchoMQ.Keyspace.job_key(queue, job_id || "")
        k -> EchoMQ.Keyspace.queue_key(queue, k)
      end)

    do_eval(conn, s, keys, argv)
  end

  @doc false
  def hello_cache(%__MODULE__{hellos: h}, queue), do: safe(fn -> Agent.get(h, &Map.get(&1, queue)) end)
  @doc false
  def put_hello(%__MODULE__{hellos: h}, queue, g), do: safe(fn -> Agent.update(h, &Map.put(&1, queue, g)) end)

  @doc """
  Runs one command over a socket of its own with a typed RESP2 reader: integers stay integers,
  errors are `{:error, {:server, msg}}`. For checks where `1` and `"1"` differ (the
  conformance replay); eredis flattens them.
  """
  @spec typed_command(t(), [iodata() | integer()]) :: {:ok, reply()} | error()
  def typed_command(%__MODULE__{} = c, args) do
    with {:ok, sock} <- EchoMQ.Connector.RESP.open(c.host, c.port, c.database, c.password) do
      try do
        EchoMQ.Connector.RESP.command(sock, Enum.map(args, &arg/1))
      after
        :gen_tcp.close(sock)
      end
    end
  end

  @doc "`eval/4` over `typed_command/2`: the reply with its integers kept apart from text."
  def typed_eval(conn, %Script{} = s, keys, argv) do
    tail = [length(keys) | keys] ++ argv

    case typed_command(conn, ["EVALSHA", s.sha | tail]) do
      {:error, {:server, "NOSCRIPT" <> _}} -> typed_command(conn, ["EVAL", s.body | tail])
      other -> other
    end
  end

  @doc "A reply read as an integer (eredis gives integer replies as text)."
  @spec int(reply()) :: integer() | nil
  def int(n) when is_integer(n), do: n
  def int(nil), do: nil
  def int(b) when is_binary(b), do: String.to_integer(b)

  # ── internals ──────────────────────────────────────────────────────────────

  defp address(opts) do
    case opts[:url] do
      nil ->
        {opts[:host] || "127.0.0.1", opts[:port] || 6379, opts[:database] || 0}

      url ->
        u = URI.parse(url)

        db =
          case u.path do
            p when p in [nil, "", "/"] -> 0
            "/" <> d -> String.to_integer(d)
          end

        {u.host || "127.0.0.1", u.port || 6379, db}
    end
  end

  # eredis links to the caller and its start_link exits the caller when the server is not
  # there: a plain TCP probe first turns that into an error reply.
  defp reachable(host, port) do
    case :gen_tcp.connect(String.to_charlist(host), port, [:binary, active: false], 5_000) do
      {:ok, s} ->
        :gen_tcp.close(s)
        :ok

      {:error, reason} ->
        {:error, {:no_server, "no redis-server at #{host}:#{port} (#{inspect(reason)})"}}
    end
  end

  defp start_client(host, port, db, password) do
    # eredis 1.2: (Host, Port, Database, Password, ReconnectSleep ms, ConnectTimeout ms).
    :eredis.start_link(String.to_charlist(host), port, db, String.to_charlist(password || ""), 100, 5_000)
  end

  defp arg(a) when is_binary(a), do: a
  defp arg(a) when is_integer(a), do: Integer.to_string(a)
  defp arg(a) when is_atom(a), do: Atom.to_string(a)
  defp arg(a) when is_list(a), do: IO.iodata_to_binary(a)

  defp norm(:undefined), do: nil
  defp norm(l) when is_list(l), do: Enum.map(l, &norm/1)
  defp norm(v), do: v

  defp safe(fun) do
    fun.()
  catch
    :exit, {:timeout, _} -> {:error, :timeout}
    :exit, reason -> {:error, {:exit, reason}}
  end
end

defmodule EchoMQ.Connector.RESP do
  @moduledoc false
  # A RESP2 reader that keeps the reply types eredis flattens (integer vs bulk string).

  def open(host, port, db, password) do
    with {:ok, s} <-
           :gen_tcp.connect(String.to_charlist(host), port, [:binary, active: false, packet: :raw], 5_000),
         :ok <- auth(s, password),
         {:ok, _} <- if(db == 0, do: {:ok, "OK"}, else: command(s, ["SELECT", Integer.to_string(db)])) do
      {:ok, s}
    else
      {:error, reason} -> {:error, {:connection, reason}}
    end
  end

  defp auth(_, p) when p in [nil, ""], do: :ok
  defp auth(s, p), do: with({:ok, _} <- command(s, ["AUTH", p]), do: :ok)

  def command(sock, args) do
    frame = [
      "*",
      Integer.to_string(length(args)),
      "\r\n" | Enum.map(args, &["$", Integer.to_string(byte_size(&1)), "\r\n", &1, "\r\n"])
    ]

    with :ok <- :gen_tcp.send(sock, frame) do
      case read(sock, "") do
        {{:err, msg}, _} -> {:error, {:server, msg}}
        {v, _} -> {:ok, v}
      end
    end
  end

  defp read(sock, buf) do
    {line, rest} = line(sock, buf)

    case line do
      "+" <> s -> {s, rest}
      "-" <> s -> {{:err, s}, rest}
      ":" <> n -> {String.to_integer(n), rest}
      "$-1" -> {nil, rest}
      "*-1" -> {nil, rest}
      "$" <> n -> bulk(sock, String.to_integer(n), rest)
      "*" <> n -> many(sock, String.to_integer(n), rest, [])
    end
  end

  defp many(_sock, 0, rest, acc), do: {Enum.reverse(acc), rest}

  defp many(sock, n, rest, acc) do
    {v, rest} = read(sock, rest)
    # An error inside an array (a script's table) stays an element.
    many(sock, n - 1, rest, [v | acc])
  end

  defp bulk(_sock, n, buf) when byte_size(buf) >= n + 2 do
    <<data::binary-size(n), "\r\n", rest::binary>> = buf
    {data, rest}
  end

  defp bulk(sock, n, buf), do: bulk(sock, n, buf <> recv(sock))

  defp line(sock, buf) do
    case :binary.split(buf, "\r\n") do
      [l, rest] -> {l, rest}
      [_] -> line(sock, buf <> recv(sock))
    end
  end

  defp recv(sock) do
    {:ok, data} = :gen_tcp.recv(sock, 0, 30_000)
    data
  end
end
