#!/usr/bin/env bash
# Builds what the complete local cluster (operators/localcluster/cluster.py) runs beside the control
# plane and the nodes, into the same per-version cache, unless it is already there: kube-proxy and
# kubectl of the chosen release (hack/controlplane/version.sh: the default in VERSION, or
# KOPF_DRA_KUBERNETES_VERSION; that version's module set), CoreDNS with the plugins cluster
# DNS needs (hack/cluster/coredns), and CoreDNS's image archive for `ctr images import`.
# kube-controller-manager and kube-scheduler come from hack/controlplane/build-upstream.sh.
# Prints the bin directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../controlplane/version.sh"
COREDNS_VERSION=$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" {print $3}' \
  "$here/coredns/go.mod")
BIN="${CACHE_ROOT}/${K8S_VERSION}/cluster/bin"
want=(kube-proxy kubectl coredns images/coredns.tar)
have_all=1
for f in "${want[@]}"; do [ -e "$BIN/$f" ] || have_all=0; done
if [ "$have_all" = 1 ] && [ "$(cat "$BIN/coredns.version" 2>/dev/null)" = "$COREDNS_VERSION" ] && \
   [ "${1:-}" != "--force" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build kube-proxy, kubectl and CoreDNS (see README)" >&2; exit 1; }
rm -rf "$BIN.tmp"
mkdir -p "$BIN.tmp/images"
start=$(date +%s)
for cmd in kube-proxy kubectl; do
  echo "building ${cmd} ${K8S_VERSION} (a cold build takes several minutes)..." >&2
  (cd "$MODULE_DIR" && CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags "$cmd")" \
    -o "$BIN.tmp/${cmd}" "k8s.io/kubernetes/cmd/${cmd}")
done
echo "building CoreDNS ${COREDNS_VERSION}..." >&2
(cd "$here/coredns" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/coredns" .)
echo "$COREDNS_VERSION" > "$BIN.tmp/coredns.version"
"$here/../node/oci-image.py" "$BIN.tmp/images/coredns.tar" "kopf-dra.local/coredns:${COREDNS_VERSION#v}" \
  /coredns "$BIN.tmp/coredns:coredns"
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "cluster ${K8S_VERSION} (CoreDNS ${COREDNS_VERSION}) built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
