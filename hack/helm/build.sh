#!/usr/bin/env bash
# Builds the helm client of the pinned release (VERSION here) from the Go module proxy into the
# per-version user cache beside the control plane's, unless it is already there. Prints the path
# of the binary. The chart's tests (tests/integration/test_chart.py) and `make helm` use it.
set -euo pipefail
cd "$(dirname "$0")"
HELM_VERSION=$(cat VERSION)
CACHE_ROOT="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}"
BIN="${CACHE_ROOT}/helm-${HELM_VERSION}/bin"
if [ -x "$BIN/helm" ] && [ "${1:-}" != "--force" ]; then
  echo "$BIN/helm"
  exit 0
fi
command -v go >/dev/null || { echo "Go is needed to build helm (see README)" >&2; exit 1; }
major=$(echo "$HELM_VERSION" | cut -d. -f1)
module="helm.sh/helm/${major}"
start=$(date +%s)
echo "building helm ${HELM_VERSION} (cold build takes a few minutes)..." >&2
rm -rf "$BIN.tmp"
mkdir -p "$BIN.tmp"
# Outside any module: `go install pkg@version` resolves the release's own go.mod.
(cd "$BIN.tmp" && CGO_ENABLED=0 GOBIN="$BIN.tmp" go install -trimpath \
  -ldflags "-s -w -X ${module}/internal/version.version=${HELM_VERSION}" \
  "${module}/cmd/helm@${HELM_VERSION}")
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "helm ${HELM_VERSION} built in $(( $(date +%s) - start ))s" >&2
echo "$BIN/helm"
