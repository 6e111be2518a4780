#!/usr/bin/env bash
# Build the CEL oracle (upstream DRA device selectors behind a JSON pipe) once per Kubernetes
# library version and source into the user cache, like the local control plane; prints the
# binary's path. Usage: build.sh [VERSION], VERSION one of the module directories beside this
# file (v0.36.3, v0.37.2, ...; default the newest). main.go is one program for every version:
# the version's directory holds its go.mod and go.sum and device.go (how that release hands a
# device to CEL), and the build runs on a copy of them. Each version and source gets its own directory, so worktrees on different versions
# never rebuild each other's binary.
#
# A new version: a directory named for it with a go.mod requiring that version of k8s.io/api,
# k8s.io/apiserver and k8s.io/dynamic-resource-allocation, then `build.sh --tidy VERSION` (go
# mod tidy on the copy, its go.mod and go.sum written back).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../controlplane/toolchain.sh"
tidy=""
if [[ "${1:-}" == "--tidy" ]]; then
  tidy=1; shift
fi
version="${1:-$(cd "$here" && ls -d v*/ | tr -d / | sort -V | tail -n1)}"
module="$here/$version"
if [[ ! -f "$module/go.mod" ]]; then
  echo "no oracle module for $version (have: $(cd "$here" && ls -d v*/ | tr -d / | xargs))" >&2
  exit 2
fi
touch -a "$module/go.sum"
sum="$(cat "$here/main.go" "$module"/*.go "$module/go.mod" "$module/go.sum" | sha256sum | cut -d' ' -f1)"
cache="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}/cel-oracle/$version/${sum:0:16}"
bin="$cache/cel-oracle"
if [[ -x "$bin" && -z "$tidy" ]]; then
  echo "$bin"; exit 0
fi
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
cp "$here/main.go" "$module"/*.go "$module/go.mod" "$module/go.sum" "$src/"
toolchain=$(go_toolchain_for "$src/go.mod")
[ -z "$toolchain" ] || export GOTOOLCHAIN="$toolchain"
if [[ -n "$tidy" ]]; then
  (cd "$src" && go mod tidy >&2)
  cp "$src/go.mod" "$src/go.sum" "$module/"
  bash "$0" "$version"; exit
fi
mkdir -p "$cache"
(cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp.$$" . >&2)
mv "$bin.tmp.$$" "$bin"
echo "$bin"
