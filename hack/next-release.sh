#!/usr/bin/env bash
# Kubernetes' next minor, followed from its pre-releases: prints the newest tag of that minor the
# Go module proxy serves and the one pinned (the last line of hack/controlplane/VERSIONS when it
# is newer than VERSION, the default release). With --pin, moves the pin to that tag: the line in
# VERSIONS, the control plane's module (gen-go-mod.sh), the CEL and allocator oracles' modules
# (hack/cel-oracle, hack/allocator-oracle: renamed, their requirements moved, tidied) and the gate
# tables (hack/featuregates/generate.sh writes operators/api/gate_tables.py). Then `make test`
# says what the new tag changed. Exit 3: a newer tag than the pin is served.
# Usage: next-release.sh [--pin] [MINOR]   (MINOR: 1.38; default: the pinned next minor)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cp_dir="$root/hack/controlplane"
pin=""
if [[ "${1:-}" == "--pin" ]]; then
  pin=1; shift
fi
default="$(cat "$cp_dir/VERSION")"
pinned="$(tail -n1 "$cp_dir/VERSIONS")"
if [[ "$(printf '%s\n%s\n' "$default" "$pinned" | sort -V | tail -n1)" == "$default" ]]; then
  pinned=""  # no minor newer than the default is followed
fi
minor="${1:-}"
if [[ -z "$minor" ]]; then
  [[ -n "$pinned" ]] || { echo "no next minor pinned in hack/controlplane/VERSIONS: name one (1.39)" >&2; exit 2; }
  minor="$(echo "$pinned" | sed 's/^v\([0-9]*\.[0-9]*\)\..*/\1/')"
fi
proxy="$(go env GOPROXY | tr ',|' '\n\n' | grep -m1 -E '^(https?|file)://' || true)"
[[ -n "$proxy" ]] || { echo "no Go module proxy in GOPROXY ($(go env GOPROXY))" >&2; exit 1; }
tags="$(curl -fsS --max-time 30 "$proxy/k8s.io/kubernetes/@v/list")" || {
  echo "cannot list k8s.io/kubernetes's tags at $proxy" >&2; exit 1; }
# sort -V puts v1.38.0 before v1.38.0-rc.0; a release beats its pre-releases.
newest="$(echo "$tags" | grep -x "v${minor}\.0" || echo "$tags" | grep "^v${minor}\.0-" | sort -V | tail -n1 || true)"
[[ -n "$newest" ]] || { echo "the proxy ($proxy) serves no tag of Kubernetes ${minor} yet" >&2; exit 1; }
echo "newest: $newest"
echo "pinned: ${pinned:-none}"
if [[ "$newest" == "$pinned" ]]; then
  exit 0
fi
if [[ -z "$pin" ]]; then
  echo "run hack/next-release.sh --pin to move the pin to $newest" >&2
  exit 3
fi
old_staging="${pinned:+v0.${pinned#v1.}}"
new_staging="v0.${newest#v1.}"
if [[ -n "$pinned" ]]; then
  sed -i "s/^${pinned}\$/${newest}/" "$cp_dir/VERSIONS"
  git -C "$root" rm -rq "hack/controlplane/$pinned"
else
  echo "$newest" >> "$cp_dir/VERSIONS"
fi
"$cp_dir/gen-go-mod.sh" "$newest"
for oracle in cel-oracle allocator-oracle; do
  dir="$root/hack/$oracle"
  from="${old_staging:-$(cd "$dir" && ls -d v*/ | tr -d / | sort -V | tail -n1)}"
  if [[ -n "$old_staging" ]]; then
    git -C "$root" mv "hack/$oracle/$from" "hack/$oracle/$new_staging"
  else
    cp -r "$dir/$from" "$dir/$new_staging"
  fi
  sed -i "s/ ${from}\$/ ${new_staging}/" "$dir/$new_staging/go.mod"
  "$dir/build.sh" --tidy "$new_staging" >/dev/null
done
"$root/hack/featuregates/generate.sh"
echo "pinned $newest: run make test" >&2
