defmodule EchoMQ.Keyspace do
  @moduledoc "The key taxonomy (SPEC 4): every key of queue `q` lives under `emq:{q}:`."

  @doc "The queue's base root, the `prefix` ARGV of most scripts."
  def prefix(queue), do: "emq:{" <> queue <> "}:"
  @doc "The full name of the queue's key `name`."
  def queue_key(queue, name), do: prefix(queue) <> name
  @doc "The key of a job's row."
  def job_key(queue, job_id), do: prefix(queue) <> "job:" <> job_id

  @doc """
  Checks a queue, group, repeat or scheduler name (SPEC 4, 25.1): 1 to 200 characters, no
  braces, whitespace or control characters.
  """
  @spec check_name(String.t(), term()) :: :ok | {:error, {:input, String.t()}}
  def check_name(what, name) do
    cond do
      not is_binary(name) or not String.valid?(name) ->
        {:error, {:input, "#{what} must be a string, got #{inspect(name)}"}}

      String.length(name) < 1 or String.length(name) > 200 ->
        {:error, {:input, "#{what} must be 1 to 200 characters, got #{String.length(name)}"}}

      name =~ ~r/[{}\s[:cntrl:]]/u ->
        {:error,
         {:input,
          "#{what} #{inspect(name)} holds a brace, whitespace or a control character: pick a plain name"}}

      true ->
        :ok
    end
  end
end
