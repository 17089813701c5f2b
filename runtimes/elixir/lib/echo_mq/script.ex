defmodule EchoMQ.Script do
  @moduledoc """
  One protocol script, loaded verbatim from `protocol/scripts/<verb>.lua`. Its contract header's
  `-- KEYS:` line is the one source of its key order (SPEC 1), as in the Go runtime.
  """
  defstruct [:name, :keys, :body, :sha]

  @type t :: %__MODULE__{name: String.t(), keys: [String.t()], body: binary(), sha: String.t()}

  @doc "Reads a script's body and its KEYS line."
  @spec parse(String.t(), binary()) :: {:ok, t()} | {:error, String.t()}
  def parse(name, body) do
    case Regex.run(~r/^-- KEYS:(.*)$/m, body) do
      [_, keys] ->
        sha = :crypto.hash(:sha, body) |> Base.encode16(case: :lower)
        {:ok, %__MODULE__{name: name, keys: String.split(keys), body: body, sha: sha}}

      nil ->
        {:error, "protocol/scripts/#{name}.lua has no \"-- KEYS:\" line in its contract"}
    end
  end

  @doc """
  Loads every `.lua` of `dir` (the protocol's scripts directory) into a map by verb.
  """
  @spec load(Path.t()) :: {:ok, %{String.t() => t()}} | {:error, String.t()}
  def load(dir) do
    case Path.wildcard(Path.join(dir, "*.lua")) do
      [] ->
        {:error,
         "no protocol scripts in #{dir}: pass scripts_dir:, set ECHOMQ_PROTOCOL to the protocol " <>
           "directory, or `config :echo_mq, scripts_dir: ...`"}

      files ->
        Enum.reduce_while(files, {:ok, %{}}, fn f, {:ok, acc} ->
          name = Path.basename(f, ".lua")

          case parse(name, File.read!(f)) do
            {:ok, s} -> {:cont, {:ok, Map.put(acc, name, s)}}
            err -> {:halt, err}
          end
        end)
    end
  end

  @doc """
  The scripts directory: the `:scripts_dir` option, else `$ECHOMQ_PROTOCOL/scripts`, else the
  `:echo_mq, :scripts_dir` app env, else `../../protocol/scripts` relative to this Mix project
  (runtimes/elixir sits two levels below the repository root).
  """
  @spec dir(keyword()) :: Path.t()
  def dir(opts \\ []) do
    cond do
      d = opts[:scripts_dir] -> d
      (p = System.get_env("ECHOMQ_PROTOCOL")) && p != "" -> Path.join(p, "scripts")
      d = Application.get_env(:echo_mq, :scripts_dir) -> d
      true -> Path.expand("../../../../protocol/scripts", __DIR__)
    end
  end
end
