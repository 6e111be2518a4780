#!/usr/bin/env bash
# Builds what a real node needs, into the same per-version cache as the control plane, unless it
# is already there: the kubelet of the chosen release (hack/controlplane/version.sh: the default in
# VERSION, or KOPF_DRA_KUBERNETES_VERSION; that version's module set), containerd
# with its runc shim and ctr (hack/node/containerd), a static pause program, and two OCI image
# archives (pause, busybox) that `ctr images import` loads, since there is no registry.
# runc, the CNI plugins and busybox come from Debian (hack/node/install-deps.sh). Prints the bin dir.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../controlplane/version.sh"
CONTAINERD_VERSION=$(awk '$1 == "require" && $2 == "github.com/containerd/containerd/v2" {print $3}' \
  "$here/containerd/go.mod")
BIN="${CACHE_ROOT}/${K8S_VERSION}/node/bin"
want=(kubelet containerd containerd-shim-runc-v2 ctr pause images/pause.tar images/busybox.tar)
have_all=1
for f in "${want[@]}"; do [ -e "$BIN/$f" ] || have_all=0; done
if [ "$have_all" = 1 ] && [ -f "$BIN/containerd.version" ] && \
   [ "$(cat "$BIN/containerd.version")" = "$CONTAINERD_VERSION" ] && [ "${1:-}" != "--force" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build the kubelet and containerd (see README)" >&2; exit 1; }
command -v busybox >/dev/null || { echo "busybox is needed for the busybox image (hack/node/install-deps.sh)" >&2; exit 1; }
rm -rf "$BIN.tmp"
mkdir -p "$BIN.tmp/images"
start=$(date +%s)
if [ -x "$BIN/kubelet" ] && [ "${1:-}" != "--force" ]; then
  cp "$BIN/kubelet" "$BIN.tmp/kubelet"
else
  echo "building kubelet ${K8S_VERSION} (a cold build takes several minutes)..." >&2
  (cd "$MODULE_DIR" && CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags kubelet)" \
    -o "$BIN.tmp/kubelet" k8s.io/kubernetes/cmd/kubelet)
fi
echo "building containerd ${CONTAINERD_VERSION}..." >&2
(cd "$here/containerd" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}" \
  -o "$BIN.tmp/" github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr)
echo "$CONTAINERD_VERSION" > "$BIN.tmp/containerd.version"
(cd "$here/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/pause" .)
"$here/oci-image.py" "$BIN.tmp/images/pause.tar" kopf-dra.local/pause:1 /pause "$BIN.tmp/pause:pause"
"$here/oci-image.py" "$BIN.tmp/images/busybox.tar" docker.io/library/busybox:1.36 /bin/sh --busybox-applets \
  "$(command -v busybox):bin/busybox"
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "node ${K8S_VERSION} (containerd ${CONTAINERD_VERSION}) built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
