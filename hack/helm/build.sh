#!/usr/bin/env bash
# Builds the helm client of the pinned release (VERSION here) from the Go module proxy into the
# per-version user cache beside the control plane's (../go-install.sh), unless it is already
# there. Prints the path of the binary. The chart's tests (tests/integration/test_chart.py) and
# `make helm` use it.
set -euo pipefail
cd "$(dirname "$0")"
HELM_VERSION=$(cat VERSION)
module="helm.sh/helm/$(echo "$HELM_VERSION" | cut -d. -f1)"
exec ../go-install.sh helm "$HELM_VERSION" "${module}/cmd/helm@${HELM_VERSION}" \
  "-X ${module}/internal/version.version=${HELM_VERSION}" "$@"
