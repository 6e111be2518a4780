#!/usr/bin/env bash
# Builds Kueue (sigs.k8s.io/kueue, the version in hack/kueue/VERSION) for the complete local
# cluster, as the control plane is built: from its Go module (the module proxy), no registry.
# Into <cache>/kueue/<version>/: bin/kueue (its cmd/kueue, stamped with the version), its image
# archive images/kueue.tar (kopf-dra.local/kueue:<version>, the binary as /manager, user
# 65532:65532 as upstream's image) for `ctr images import`, and chart/, its own Helm chart
# (the module's charts/kueue, unchanged). Unless already there. Prints the directory.
#
# usage: hack/kueue/build.sh [--force]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
KUEUE_VERSION=$(cat "$here/VERSION")
CACHE_ROOT="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}"
OUT="${CACHE_ROOT}/kueue/${KUEUE_VERSION}"
if [ -e "$OUT/images/kueue.tar" ] && [ -e "$OUT/chart/Chart.yaml" ] && [ -x "$OUT/bin/kueue" ] && \
   [ "${1:-}" != "--force" ]; then
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build Kueue (see README)" >&2; exit 1; }
start=$(date +%s)
echo "building Kueue ${KUEUE_VERSION} (a cold build downloads its modules and takes minutes)..." >&2
module=$(go mod download -json "sigs.k8s.io/kueue@${KUEUE_VERSION}" | \
  python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp/bin" "$OUT.tmp/images"
pkg=sigs.k8s.io/kueue/pkg/version
(cd "$module" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X '${pkg}.GitVersion=${KUEUE_VERSION}' -X '${pkg}.BuildDate=1970-01-01T00:00:00Z'" \
  -o "$OUT.tmp/bin/kueue" ./cmd/kueue)
"$here/../node/oci-image.py" "$OUT.tmp/images/kueue.tar" "kopf-dra.local/kueue:${KUEUE_VERSION}" \
  /manager "$OUT.tmp/bin/kueue:manager" --user 65532:65532
cp -r "$module/charts/kueue" "$OUT.tmp/chart"
chmod -R u+w "$OUT.tmp/chart"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "Kueue ${KUEUE_VERSION} built in $(( $(date +%s) - start ))s" >&2
echo "$OUT"
