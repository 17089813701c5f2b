#!/usr/bin/env bash
# The Go runtime's checks, offline: vendor/ from Debian's packaged sources, then gofmt, go vet
# and go test (the conformance replay included; the tests start their own redis-server).
# Without Go it skips, saying so.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v go >/dev/null 2>&1; then
  echo "runtimes/go: skipped, Go is not installed (apt-get install golang-go golang-github-gomodule-redigo-dev)" >&2
  exit 0
fi
./vendor.sh
export GOFLAGS=-mod=vendor GOPROXY=off
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './vendor/*'))
if [ -n "$unformatted" ]; then
  echo "runtimes/go: not gofmt-formatted: $unformatted" >&2
  exit 1
fi
go vet ./...
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
go test -count=1 -v ./... >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then cat "$log"; else grep -E '^(ok|---)|conformance:|skipping' "$log"; fi
exit "$rc"
