#!/usr/bin/env bash
# The example driver's NVML source on this machine's NVIDIA GPU: no cluster, under 2 minutes.
#
#   hack/gpu/check.sh                         # needs python3 with nvidia-ml-py and kopf-dra's deps
#   WHEELS=dir hack/gpu/check.sh              # installs dir/*.whl (kopf-dra's wheel and what the
#                                             # machine lacks) into a temporary folder first
#   DRIVER_ROOT=/usr/local/nvidia hack/gpu/check.sh   # libraries from there, not ldconfig
#   hack/gpu/check.sh --fake tests/fixtures/gpu/nvidia-h100-80gb-hbm3   # the fake NVML
#
# Prints PASS/FAIL/SKIP lines; exits nonzero when a check fails.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
if [ -n "${WHEELS:-}" ]; then
  site="$(mktemp -d)"
  trap 'rm -rf "$site"' EXIT
  "$PYTHON" -m pip install -q --no-index --no-deps --target "$site" "$WHEELS"/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
fi
exec timeout 110 "$PYTHON" "$here/check.py" "$@"
