#!/usr/bin/env bash
# Builds kube-scheduler and kube-controller-manager of the pinned Kubernetes release, the same way
# and into the same per-version cache as the control plane, for the side-by-side benchmark
# (bench/bench_compare.py). Prints the bin directory.
set -euo pipefail
cd "$(dirname "$0")"
K8S_VERSION=$(cat VERSION)
CACHE_ROOT="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}"
BIN="${CACHE_ROOT}/${K8S_VERSION}/upstream/bin"
if [ -x "$BIN/kube-scheduler" ] && [ -x "$BIN/kube-controller-manager" ] && [ "${1:-}" != "--force" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build kube-scheduler (see README)" >&2; exit 1; }
mkdir -p "$BIN.tmp"
pkg=k8s.io/component-base/version
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
start=$(date +%s)
for cmd in kube-scheduler kube-controller-manager; do
  ldflags="-s -w -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
  ldflags="$ldflags -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  ldflags="$ldflags -X ${pkg}/verflag.programName=${cmd}"
  echo "building ${cmd} ${K8S_VERSION} (a cold build takes several minutes)..." >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN.tmp/${cmd}" "k8s.io/kubernetes/cmd/${cmd}"
done
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "upstream schedulers ${K8S_VERSION} built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
