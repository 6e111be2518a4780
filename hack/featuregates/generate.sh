#!/usr/bin/env bash
# Regenerates operators/api/gate_tables.py: the feature gates kube-scheduler of each pinned
# Kubernetes release registers (hack/controlplane/VERSIONS), read from that release's own
# sources by main.go, built with the release's module file (hack/controlplane/<version>/go.mod,
# which tools.go keeps complete for kube-scheduler). Run after a version is added or changed;
# tests/integration/test_gate_tables.py compares the result with kube-scheduler's --help.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$root/hack/controlplane/toolchain.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tables=()
while read -r version; do
  [ -n "$version" ] || continue
  echo "reading the feature gates of kube-scheduler ${version}..." >&2
  toolchain=$(go_toolchain_for "$root/hack/controlplane/${version}/go.mod")
  (cd "$here" && GOTOOLCHAIN="${toolchain:-${GOTOOLCHAIN:-}}" \
    go run -modfile="../controlplane/${version}/go.mod" . "$version") > "$work/$version.json"
  tables+=("$work/$version.json")
done < "$root/hack/controlplane/VERSIONS"
python3 "$here/render.py" "$root/operators/api/gate_tables.py" "${tables[@]}"
"${PYTHON:-$root/.venv/bin/python}" -m ruff format -q "$root/operators/api/gate_tables.py"
echo "operators/api/gate_tables.py written" >&2
