#!/usr/bin/env bash
# Build the allocator oracle (upstream's structured allocator behind a JSON pipe) once per
# library version and source into the user cache, like the local control plane; prints the
# binary's path. Usage: build.sh [VERSION], VERSION one of the module directories beside this
# file (v0.36.3 for Kubernetes 1.36, v0.37.2 for 1.37, v0.38.0-beta.0 for 1.38's pre-release;
# default the newest). main.go is one program for every version (it sets the allocator's feature
# fields by name): the version's directory holds its go.mod, go.sum and slices.go (how that
# release's allocator takes slices and its allocated state), and the build runs on a copy. Each
# version and source gets its own cache directory, so worktrees never rebuild each other's.
#
# A new version: a directory named for it with a go.mod requiring that version of k8s.io/api,
# k8s.io/apimachinery and k8s.io/dynamic-resource-allocation, then `build.sh --tidy VERSION`
# (go mod tidy on the copy, its go.mod and go.sum written back).
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
cache="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}/allocator-oracle/$version/${sum:0:16}"
bin="$cache/allocator-oracle"
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
