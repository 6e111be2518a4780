#!/usr/bin/env bash
# Builds promtool of the pinned Prometheus release (VERSION here: the Go module's version,
# v0.<major><minor, two digits>.<patch> for Prometheus <major>.<minor>.<patch>) from the Go module
# proxy into the per-version user cache beside helm's (../go-install.sh), unless it is already
# there. Prints the path of the binary. The chart's monitoring tests
# (tests/integration/test_monitoring.py) and `make promtool` use it.
set -euo pipefail
cd "$(dirname "$0")"
MODULE_VERSION=$(cat VERSION)
# promtool --version tells the release, as Prometheus' own builds do: v0.316.0 is 3.16.0.
minor=$(echo "$MODULE_VERSION" | cut -d. -f2)
patch=$(echo "$MODULE_VERSION" | cut -d. -f3)
release="$((10#$minor / 100)).$((10#$minor % 100)).${patch}"
exec ../go-install.sh promtool "$MODULE_VERSION" \
  "github.com/prometheus/prometheus/cmd/promtool@${MODULE_VERSION}" \
  "-X github.com/prometheus/common/version.Version=${release}" "$@"
