#!/usr/bin/env bash
# The Elixir runtime's checks, offline (no Hex: deps: []): mix format, a warning-free compile
# and mix test (the conformance replay included; the tests start their own redis-server on free
# ports). Without Elixir or eredis (Debian's erlang-redis-client) it skips, saying so.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v elixir >/dev/null 2>&1 || ! command -v mix >/dev/null 2>&1; then
  echo "runtimes/elixir: skipped, Elixir is not installed (apt-get install elixir erlang-redis-client)" >&2
  exit 0
fi
if ! erl -noshell -eval 'halt(case code:which(eredis) of non_existing -> 1; _ -> 0 end).'; then
  echo "runtimes/elixir: skipped, eredis is not installed (apt-get install erlang-redis-client)" >&2
  exit 0
fi
export MIX_ENV=test
mix format --check-formatted
mix compile --warnings-as-errors --force
mix test
