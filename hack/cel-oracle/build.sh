#!/usr/bin/env bash
# Build the CEL oracle (upstream DRA device selectors behind a JSON pipe) once per source
# version into the user cache, like the local control plane; prints the binary's path. Each
# version of the source gets its own directory, so worktrees on different versions never
# rebuild each other's binary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="v0.36.3"
sum="$(cat "$here/main.go" "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)"
cache="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}/cel-oracle/$version/${sum:0:16}"
bin="$cache/cel-oracle"
if [[ -x "$bin" ]]; then
  echo "$bin"; exit 0
fi
mkdir -p "$cache"
(cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp.$$" . >&2)
mv "$bin.tmp.$$" "$bin"
echo "$bin"
