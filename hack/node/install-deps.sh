#!/usr/bin/env bash
# Installs from Debian's packages what real nodes (make e2e-node) need beside the binaries that
# hack/node/build.sh builds: runc, the CNI plugins, busybox (the busybox image), and nftables for
# the complete local cluster's kube-proxy. Only what is missing; needs root and apt-get, and does
# nothing elsewhere.
set -euo pipefail
want=()
command -v runc >/dev/null || want+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || \
  want+=(containernetworking-plugins)
command -v busybox >/dev/null || want+=(busybox-static)
# The complete local cluster's kube-proxy (nftables mode) runs nft
# (operators/localcluster/cluster.py).
PATH="$PATH:/usr/sbin:/sbin" command -v nft >/dev/null || want+=(nftables)
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "real nodes need ${want[*]} (Debian packages); not root with apt-get: not installed" >&2
  exit 0
fi
echo "installing ${want[*]}..." >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}" >/dev/null
