#!/usr/bin/env bash
# Builds kube-apiserver and etcd of the pinned Kubernetes release into a per-version user cache,
# unless they are already there. Prints the bin directory.
set -euo pipefail
cd "$(dirname "$0")"
K8S_VERSION=$(cat VERSION)
CACHE_ROOT="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}"
BIN="${CACHE_ROOT}/${K8S_VERSION}/bin"
if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ] && [ "${1:-}" != "--force" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build the local control plane (see README)" >&2; exit 1; }
mkdir -p "$BIN.tmp"
pkg=k8s.io/component-base/version
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
ldflags="-s -w -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
ldflags="$ldflags -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X ${pkg}/verflag.programName=kube-apiserver"
start=$(date +%s)
echo "building kube-apiserver ${K8S_VERSION} (cold build takes several minutes)..." >&2
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
echo "building etcd..." >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/etcd" ./etcd
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "control plane ${K8S_VERSION} built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
