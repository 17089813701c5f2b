#!/usr/bin/env bash
# Makes vendor/ from Debian's packaged Go sources, so the module builds with no module proxy:
# the one dependency, redigo, comes from golang-github-gomodule-redigo-dev (/usr/share/gocode).
# Then: GOFLAGS=-mod=vendor GOPROXY=off go test ./...
set -euo pipefail
cd "$(dirname "$0")"
src=${GOCODE:-/usr/share/gocode}/src/github.com/gomodule/redigo
if [ ! -d "$src/redis" ]; then
  echo "redigo is missing: apt-get install golang-github-gomodule-redigo-dev" >&2
  exit 1
fi
mkdir -p vendor/github.com/gomodule
ln -sfn "$src" vendor/github.com/gomodule/redigo
printf '# github.com/gomodule/redigo v1.8.3\n## explicit; go 1.14\ngithub.com/gomodule/redigo/redis\n' >vendor/modules.txt
