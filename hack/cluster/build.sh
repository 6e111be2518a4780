#!/usr/bin/env bash
# Builds what the complete local cluster (operators/localcluster/cluster.py) runs beside the control
# plane and the nodes, into the same per-version cache, unless it is already there: kube-proxy and
# kubectl of the pinned release (hack/controlplane's module set), CoreDNS with the plugins cluster
# DNS needs (hack/cluster/coredns), and CoreDNS's image archive for `ctr images import`.
# kube-controller-manager and kube-scheduler come from hack/controlplane/build-upstream.sh.
# Prints the bin directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
K8S_VERSION=$(cat "$here/../controlplane/VERSION")
COREDNS_VERSION=$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" {print $3}' \
  "$here/coredns/go.mod")
CACHE_ROOT="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}"
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
pkg=k8s.io/component-base/version
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
for cmd in kube-proxy kubectl; do
  ldflags="-s -w -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
  ldflags="$ldflags -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  ldflags="$ldflags -X ${pkg}/verflag.programName=${cmd}"
  echo "building ${cmd} ${K8S_VERSION} (a cold build takes several minutes)..." >&2
  (cd "$here/../controlplane" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
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
