#!/usr/bin/env bash
# Regenerates the image's locks from the mirror and PyPI as they are now:
#
#   hack/image/lock.sh debian   # debian.lock: every package of the root filesystem, exact versions
#   hack/image/lock.sh python   # requirements.lock + build-requirements.lock, wheels by sha256
#   hack/image/lock.sh          # both
#
# deb.debian.org keeps one version of each package per suite: after a point release or a security
# update hack/image/build.sh warns, naming each package whose locked version is gone, and takes
# the mirror's; then `hack/image/lock.sh debian` pins them again.
# The Python lock follows constraints.txt (regenerate it after changing that file).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/image/common.sh
. "$here/common.sh"
what="${1:-all}"
case "$what" in
  debian | python | all) ;;
  *) echo "usage: $0 [debian|python]" >&2; exit 2 ;;
esac

# The wheels' platforms: glibc 2.36 (bookworm) and every older manylinux, as pip on the image
# would accept them (pip does not expand a --platform of manylinux_2_36 by itself).
platform_flags() {
  local machine="$1" i
  for i in $(seq 36 -1 5); do printf -- '--platform manylinux_2_%s_%s ' "$i" "$machine"; done
  printf -- '--platform manylinux2014_%s ' "$machine"
  if [ "$machine" = x86_64 ]; then
    printf -- '--platform manylinux2010_x86_64 --platform manylinux1_x86_64 '
  fi
}

lock_debian() {
  command -v mmdebstrap >/dev/null || { echo "mmdebstrap is needed (hack/image/install-deps.sh)" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "mmdebstrap's root mode needs root" >&2; exit 1; }
  local arch mirrors=() top out
  arch=$(dpkg --print-architecture)
  read_mirrors
  top=$(grep -v '^\s*\(#\|$\)' "$here/packages" | paste -sd, -)
  out=$(mktemp)
  # The Essential set and the image's packages, /usr merged as debootstrap does it (the usrmerge
  # package would bring perl); the list is read from dpkg's database before the chroot goes.
  echo "resolving ${top} on ${arch}..." >&2
  # shellcheck disable=SC2016  # "$1" is the hook's argument, the root filesystem
  KOPF_DRA_LOCK_OUT="$out" mmdebstrap --quiet --mode=root --variant=essential \
    --architectures="$arch" --include="$top" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --customize-hook='chroot "$1" dpkg-query -W -f "\${Package}=\${Version}\n" > "$KOPF_DRA_LOCK_OUT"' \
    bookworm /dev/null "${mirrors[@]}"
  {
    echo "# Every Debian package of the image's root filesystem at its exact version (architecture"
    echo "# ${arch}), installed by hack/image/build.sh; the top-level list is hack/image/packages."
    echo "# Regenerate when the mirror has moved on (the build names the package): hack/image/lock.sh debian"
    echo "architecture=${arch}"
    LC_ALL=C sort "$out"
  } > "$here/debian.lock"
  rm -f "$out"
  echo "wrote $here/debian.lock ($(grep -vc '^#\|^architecture=' "$here/debian.lock") packages)" >&2
}

# name==version --hash=sha256:... for every wheel in $1 (x86_64 and aarch64 files merged).
write_python_lock() {
  "$PYTHON" - "$@" <<'EOF'
import collections, hashlib, pathlib, sys
out, header, *dirs = sys.argv[1:]
hashes = collections.defaultdict(set)
for d in dirs:
    for wheel in pathlib.Path(d).glob("*.whl"):
        name, version = wheel.name.split("-")[:2]
        hashes[(name.lower().replace("_", "-"), version)].add(
            hashlib.sha256(wheel.read_bytes()).hexdigest()
        )
lines = [header.rstrip("\n")]
for (name, version), digests in sorted(hashes.items()):
    lines.append(f"{name}=={version} \\")
    lines += [f"    --hash=sha256:{h} \\" for h in sorted(digests)]
    lines[-1] = lines[-1].removesuffix(" \\")
pathlib.Path(out).write_text("\n".join(lines) + "\n")
EOF
}

lock_python() {
  "$PYTHON" -m pip --version >/dev/null 2>&1 || { echo "$PYTHON has no pip (PYTHON=...)" >&2; exit 1; }
  local work deps build machine
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  # The project's runtime requirements and build backend, as pyproject.toml declares them.
  # The image runs the driver on real GPUs too: the nvidia extra is part of it.
  mapfile -t deps < <("$PYTHON" -c 'import sys, tomllib; t = tomllib.load(open(sys.argv[1], "rb")); print("\n".join(t["project"]["dependencies"] + t["project"]["optional-dependencies"]["nvidia"]))' "$root/pyproject.toml")
  mapfile -t build < <("$PYTHON" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]))' "$root/pyproject.toml")
  # A local wheel directory of the environment (PIP_FIND_LINKS) must not end up in the lock.
  for machine in x86_64 aarch64; do
    echo "resolving the runtime wheels for ${machine} (constraints.txt)..." >&2
    # shellcheck disable=SC2046  # one word per flag
    env -u PIP_FIND_LINKS "$PYTHON" -m pip download -q --dest "$work/$machine" \
      --only-binary=:all: $(platform_flags "$machine") --python-version 3.11 \
      --implementation cp --abi cp311 --constraint "$root/constraints.txt" "${deps[@]}"
  done
  echo "resolving pip and the build backend (${build[*]})..." >&2
  env -u PIP_FIND_LINKS "$PYTHON" -m pip download -q --dest "$work/build" --no-deps \
    --only-binary=:all: pip "${build[@]}"
  write_python_lock "$here/requirements.lock" \
    "# The image's Python packages: kopf-dra's runtime requirements at constraints.txt's versions,
# one wheel per platform (CPython 3.11 on glibc 2.36: x86_64, aarch64) by sha256; installed with
# pip --require-hashes --no-deps (hack/image/venv.sh). Regenerate: hack/image/lock.sh python" \
    "$work/x86_64" "$work/aarch64"
  write_python_lock "$here/build-requirements.lock" \
    "# What builds the image's venv and never enters it: pip, and the build backend of
# pyproject.toml that makes kopf-dra's wheel, by sha256. Regenerate: hack/image/lock.sh python" \
    "$work/build"
  echo "wrote $here/requirements.lock and $here/build-requirements.lock" >&2
}

case "$what" in
  debian) lock_debian ;;
  python) lock_python ;;
  all) lock_debian; lock_python ;;
esac
