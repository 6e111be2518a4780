#!/usr/bin/env bash
# Builds a Go command of a pinned release from the Go module proxy into the per-version user
# cache (<cache>/NAME-VERSION/bin), unless it is already there, and prints the binary's path:
# the tools the tests run (hack/helm, hack/promtool) come this way, so CI needs only Go.
# Usage: go-install.sh NAME VERSION PACKAGE@VERSION LDFLAGS [--force]
# (NAME: the command's binary; LDFLAGS: besides -s -w.)
set -euo pipefail
name=$1 version=$2 package=$3 ldflags=$4
CACHE_ROOT="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}"
BIN="${CACHE_ROOT}/${name}-${version}/bin"
if [ -x "$BIN/$name" ] && [ "${5:-}" != "--force" ]; then
  echo "$BIN/$name"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build $name (see README)" >&2; exit 1; }
start=$(date +%s)
echo "building $name ${version} (cold build takes a few minutes)..." >&2
rm -rf "$BIN.tmp"
mkdir -p "$BIN.tmp"
# Outside any module: `go install pkg@version` resolves the release's own go.mod.
(cd "$BIN.tmp" && CGO_ENABLED=0 GOBIN="$BIN.tmp" go install -trimpath -ldflags "-s -w $ldflags" \
  "$package")
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "$name ${version} built in $(( $(date +%s) - start ))s" >&2
echo "$BIN/$name"
