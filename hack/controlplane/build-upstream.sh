#!/usr/bin/env bash
# Builds kube-scheduler and kube-controller-manager of the chosen Kubernetes release (version.sh),
# the same way and into the same per-version cache as the control plane, for the side-by-side
# benchmark (bench/bench_compare.py) and the complete local cluster. Prints the bin directory.
set -euo pipefail
source "$(dirname "$0")/version.sh"
BIN="${CACHE_ROOT}/${K8S_VERSION}/upstream/bin"
if [ -x "$BIN/kube-scheduler" ] && [ -x "$BIN/kube-controller-manager" ] && [ "${1:-}" != "--force" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build kube-scheduler (see README)" >&2; exit 1; }
cd "$MODULE_DIR"
mkdir -p "$BIN.tmp"
start=$(date +%s)
for cmd in kube-scheduler kube-controller-manager; do
  echo "building ${cmd} ${K8S_VERSION} (a cold build takes several minutes)..." >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags "$cmd")" -o "$BIN.tmp/${cmd}" \
    "k8s.io/kubernetes/cmd/${cmd}"
done
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "upstream schedulers ${K8S_VERSION} built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
