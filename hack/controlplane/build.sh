#!/usr/bin/env bash
# Builds kube-apiserver and etcd of the chosen Kubernetes release (version.sh: the default in
# VERSION, or KOPF_DRA_KUBERNETES_VERSION) into a per-version user cache, unless they are already
# there. Prints the bin directory.
set -euo pipefail
source "$(dirname "$0")/version.sh"
BIN="${CACHE_ROOT}/${K8S_VERSION}/bin"
if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ] && [ "${1:-}" != "--force" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build the local control plane (see README)" >&2; exit 1; }
cd "$MODULE_DIR"
mkdir -p "$BIN.tmp"
start=$(date +%s)
echo "building kube-apiserver ${K8S_VERSION} (cold build takes several minutes)..." >&2
CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags kube-apiserver)" -o "$BIN.tmp/kube-apiserver" \
  k8s.io/kubernetes/cmd/kube-apiserver
echo "building etcd..." >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/etcd" kopf-dra.local/etcd
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "control plane ${K8S_VERSION} built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
