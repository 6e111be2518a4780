#!/usr/bin/env bash
# Builds kopf-dra's image as an OCI archive, without a registry or a Docker daemon:
# mmdebstrap makes a Debian bookworm root filesystem of the packages in debian.lock at their
# exact versions, hack/image/venv.sh installs the locked wheels and kopf-dra's own wheel (built
# from this tree) into /opt/kopf-dra, GNU tar and gzip -n pack it as one layer, oci-pack.py
# adds config, manifest and index. Named docker.io/library/kopf-dra:<version>, which
# `ctr -n k8s.io images import` loads and the manifests' kopf-dra:<version> then finds.
#
# usage: hack/image/build.sh [--force] [--out DIR]
#   --out DIR  build into DIR (default: $KOPF_DRA_IMAGE_DIR, else <cache>/image)
#   --force    build even when DIR holds the archive of these inputs
# The last line of stdout is the archive's absolute path; progress goes to stderr. Inputs:
# the sources that make the wheel, hack/image/ (locks, package list, scripts), the tools'
# versions and SOURCE_DATE_EPOCH (default: the last commit's date of those paths). Needs
# root, mmdebstrap (hack/image/install-deps.sh), GNU tar, gzip, and pip ($PYTHON -m pip;
# PYTHON defaults to .venv/bin/python, else python3).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/image/common.sh
. "$here/common.sh"
force=0
out="${KOPF_DRA_IMAGE_DIR:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --out) [ $# -ge 2 ] || { echo "--out needs a directory" >&2; exit 2; }; out="$2"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (usage: $0 [--force] [--out DIR])" >&2; exit 2 ;;
  esac
  shift
done
CACHE_ROOT="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}"
out="${out:-$CACHE_ROOT/image}"
VERSION=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$root/operators/__init__.py")
[ -n "$VERSION" ] || { echo "no __version__ in operators/__init__.py" >&2; exit 1; }
NAME="docker.io/library/kopf-dra:${VERSION}"

die() { echo "hack/image/build.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap's root mode: chroot, and the files' owners)"
command -v mmdebstrap >/dev/null || die "needs mmdebstrap (hack/image/install-deps.sh installs it)"
tar --version 2>/dev/null | grep -q 'GNU tar' || die "needs GNU tar"
command -v gzip >/dev/null || die "needs gzip"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "needs pip: $PYTHON -m pip (set PYTHON=...)"
arch=$(dpkg --print-architecture)
lock_arch=$(sed -n 's/^architecture=//p' "$here/debian.lock")
[ "$arch" = "$lock_arch" ] || \
  die "debian.lock is for ${lock_arch}, this machine is ${arch}: hack/image/lock.sh debian"
case "$arch" in
  amd64) machine=x86_64 ;;
  arm64) machine=aarch64 ;;
  *) die "no wheels are locked for ${arch} (requirements.lock: x86_64, aarch64)" ;;
esac

mkdir -p "$out" "$CACHE_ROOT/image"
out="$(cd "$out" && pwd)"
archive="$out/kopf-dra-${VERSION}.oci.tar"
# One build at a time on this machine (make image beside the tests): they share the downloads.
exec 9>"$CACHE_ROOT/image/.lock"
flock 9
# What a killed build left (none runs now); a chroot mount still there keeps its directory.
for stale in "$out"/.build.*; do
  [ -e "$stale" ] || continue
  rm -rf --one-file-system "$stale" 2>/dev/null || echo "could not remove $stale (mounted?)" >&2
done

work=$(mktemp -d "$out/.build.XXXXXX")
# --one-file-system: should mmdebstrap die with /dev or /proc still mounted in the chroot, the
# cleanup must not reach through them.
trap 'rm -rf --one-file-system "$work"' EXIT
# The sources as the wheel takes them: its metadata, the package and what setup.py carries as
# operators/_share, plus hack/image (the locks venv.sh reads). From git where there is one, so
# that ignored files (caches, build output) stay out; the working tree's changes go in.
mapfile -t shared < <(sed -n 's/^SHARED = (\(.*\))$/\1/p' "$root/setup.py" | tr -d '",' | tr ' ' '\n')
[ ${#shared[@]} -gt 0 ] || die "no SHARED in setup.py"
sources=(pyproject.toml setup.py MANIFEST.in README.md LICENSE operators "${shared[@]}" hack/image)
mkdir -p "$work/build/src"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # shellcheck disable=SC2016  # the inner shell expands "$f"
  git -C "$root" ls-files -z --cached --others --exclude-standard -- "${sources[@]}" |
    (cd "$root" && xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
    tar -C "$root" --null -T - -cf - | tar -C "$work/build/src" -xf -
else
  tar -C "$root" --exclude=__pycache__ --exclude='*.pyc' --exclude='*.egg-info' \
    --exclude=hack/controlplane/bin -cf - "${sources[@]}" | tar -C "$work/build/src" -xf -
fi

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct -- "${sources[@]}" 2>/dev/null || true)
  if [ -z "$SOURCE_DATE_EPOCH" ]; then
    SOURCE_DATE_EPOCH=0
    echo "no git history: SOURCE_DATE_EPOCH=0" >&2
  fi
fi
[[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH: not seconds"
export SOURCE_DATE_EPOCH

# The cache key: everything the archive's bytes follow from.
key=$(
  {
    echo "name=$NAME arch=$arch epoch=$SOURCE_DATE_EPOCH"
    mmdebstrap --version; tar --version | head -1; gzip --version | head -1
    tar -C "$work/build/src" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
      -cf - . | sha256sum
  } | sha256sum | cut -c1-64
)
if [ "$force" = 0 ] && [ -f "$archive" ] && [ "$(cat "$archive.inputs" 2>/dev/null)" = "$key" ]; then
  echo "kopf-dra image ${VERSION}: up to date (inputs ${key:0:12})" >&2
  echo "$archive"
  exit 0
fi
start=$(date +%s)

# The wheels, by hash, for this machine's CPython 3.11 on glibc 2.36; kept per lock.
lock_hash() { cat "$@" | sha256sum | cut -c1-16; }
wheels="$CACHE_ROOT/image/wheels/${machine}-$(lock_hash "$here/requirements.lock" "$here/build-requirements.lock")"
if [ ! -f "$wheels/.complete" ]; then
  echo "downloading the locked wheels..." >&2
  rm -rf "$wheels.tmp"
  platforms=()
  # As lock.sh resolved them: glibc 2.36 and every older manylinux.
  for i in $(seq 36 -1 5); do platforms+=(--platform "manylinux_2_${i}_${machine}"); done
  platforms+=(--platform "manylinux2014_${machine}")
  if [ "$machine" = x86_64 ]; then
    platforms+=(--platform manylinux2010_x86_64 --platform manylinux1_x86_64)
  fi
  env -u PIP_FIND_LINKS "$PYTHON" -m pip download -q --no-deps --require-hashes \
    --only-binary=:all: "${platforms[@]}" --python-version 3.11 --implementation cp --abi cp311 \
    --dest "$wheels.tmp" -r "$here/build-requirements.lock" -r "$here/requirements.lock" >&2
  touch "$wheels.tmp/.complete"
  mv "$wheels.tmp" "$wheels"
fi
cp -a "$wheels" "$work/build/wheels"
rm -f "$work/build/wheels/.complete"

# The .debs, kept per lock between builds (mmdebstrap verifies them against the mirror's
# signed indices; a version the mirror no longer lists fails the build).
debs="$CACHE_ROOT/image/debs/${arch}-$(lock_hash "$here/debian.lock")"
mkdir -p "$debs"
read_mirrors
mapfile -t pins < <(grep -v '^\s*\(#\|$\)\|^architecture=' "$here/debian.lock")
excludes=()
# What debian:bookworm-slim leaves out too: documentation (but the licenses), manuals,
# translations.
for path in '/usr/share/doc/*' '/usr/share/man/*' '/usr/share/info/*' '/usr/share/locale/*' \
  '/usr/share/lintian/*' '/usr/share/groff/*' '/usr/share/linda/*'; do
  excludes+=(--dpkgopt="path-exclude=$path")
done
excludes+=(--dpkgopt='path-include=/usr/share/doc/*/copyright')
# No fsync per file while unpacking (as Docker's debian images configure dpkg): a crash only
# loses this build.
excludes+=(--dpkgopt=force-unsafe-io)
echo "building the root filesystem (${#pins[@]} packages)..." >&2
log="$work/mmdebstrap.log"
debootstrap_rootfs() {
  rm -rf "$work/rootfs"
  # shellcheck disable=SC2016  # "$1" is the hook's argument, the root filesystem
  KOPF_DRA_IMAGE_BUILD="$work/build" mmdebstrap --mode=root --variant=custom --format=directory \
    --architectures="$arch" --include="$(IFS=,; echo "${pins[*]}")" "${excludes[@]}" \
    --setup-hook=/usr/share/mmdebstrap/hooks/merged-usr/setup00.sh \
    --skip=essential/unlink \
    --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
    --setup-hook="sync-in $debs /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives $debs" \
    --customize-hook="$here/customize.sh" \
    bookworm "$work/rootfs" "${mirrors[@]}" > "$log" 2>&1
}
# deb.debian.org keeps one version per package and suite: after a point release or a security
# update a locked version is gone. The image then takes the mirror's version of exactly those
# packages (security fixes included) and says so, rather than failing every build until the
# lock is refreshed; the versions it holds are written beside the archive.
stale=()
if ! debootstrap_rootfs; then
  mapfile -t stale < <(sed -n "s/^E: Version '\(.*\)' for '\(.*\)' was not found$/\2=\1/p" "$log")
  [ ${#stale[@]} -gt 0 ] || { tail -30 "$log" >&2; die "mmdebstrap failed (above)"; }
  echo "hack/image/build.sh: warning: deb.debian.org no longer has ${stale[*]} of" \
    "hack/image/debian.lock (a point release or a security update replaced it): the image takes" \
    "the mirror's version of them; refresh the lock: hack/image/lock.sh debian" >&2
  for i in "${!pins[@]}"; do
    for gone in "${stale[@]}"; do [ "${pins[$i]}" = "$gone" ] && pins[i]="${gone%%=*}"; done
  done
  debootstrap_rootfs || { tail -30 "$log" >&2; die "mmdebstrap failed (above)"; }
fi
rootfs="$work/rootfs"
# Exactly the locked packages (at the mirror's version where the lock's is gone), nothing that
# apt chose by itself.
# shellcheck disable=SC2016  # dpkg-query's format
chroot "$rootfs" dpkg-query -W -f '${Package}=${Version}\n' | LC_ALL=C sort > "$work/installed"
printf '%s\n' "${pins[@]}" | sed 's/=.*//' | LC_ALL=C sort > "$work/wanted.names"
sed 's/=.*//' "$work/installed" | LC_ALL=C sort > "$work/installed.names"
if ! diff "$work/wanted.names" "$work/installed.names" >&2 || \
   ! printf '%s\n' "${pins[@]}" | grep '=' | LC_ALL=C sort | comm -23 - "$work/installed" | \
     { ! grep . >&2; }; then
  die "the root filesystem's packages differ from debian.lock (above): hack/image/lock.sh debian"
fi
# mmdebstrap's scaffolding for apt (not installed) and the host's name and resolver: the
# container runtime provides /etc/hostname, /etc/hosts and /etc/resolv.conf.
rm -rf "$rootfs/etc/apt" "$rootfs/var/lib/apt" "$rootfs/var/cache/apt" "$rootfs/var/log/apt" \
  "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"
# (login's empty wtmp, btmp, lastlog and faillog stay, as in debian:bookworm-slim.)
leftovers=$(find "$rootfs/var/log" "$rootfs/var/cache" "$rootfs/tmp" "$rootfs/run" -mindepth 1 \
  -type f -size +0 -printf '%P\n' 2>/dev/null | grep -v '^debconf/' || true)
[ -z "$leftovers" ] || die "files left in the root filesystem: $leftovers"
[ ! -s "$rootfs/etc/machine-id" ] || die "etc/machine-id is not empty"

echo "packing the layer..." >&2
# Sorted entries, numeric owners, every time clamped to SOURCE_DATE_EPOCH, no atime/ctime, no
# device nodes (the runtime makes /dev), no extended attributes; gzip without name and time.
find "$rootfs" -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort > "$work/top"
mkfifo "$work/layer.fifo"
sha256sum < "$work/layer.fifo" > "$work/diff_id" &
hashing=$!
tar --create --file=- --directory="$rootfs" --sort=name --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --numeric-owner --no-acls --no-xattrs \
  --no-selinux --exclude='dev/*' --files-from="$work/top" |
  tee "$work/layer.fifo" | gzip -n > "$work/layer.tar.gz"
wait "$hashing"
diff_id=$(cut -c1-64 "$work/diff_id")
rootfs_size=$(find "$rootfs" -path "$rootfs/dev" -prune -o -type f -printf '%s\n' | \
  awk '{ s += $1 } END { print s }')

digest=$("$PYTHON" "$here/oci-pack.py" --layer "$work/layer.tar.gz" \
  --diff-id "sha256:${diff_id}" --name "$NAME" --created "$SOURCE_DATE_EPOCH" \
  --arch "$arch" --entrypoint '["kopf-dra"]' --cmd '["version"]' --user 65532:65532 \
  --workdir /tmp \
  --env PATH=/opt/kopf-dra/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env PYTHONDONTWRITEBYTECODE=1 --env PYTHONUNBUFFERED=1 \
  --label org.opencontainers.image.title=kopf-dra \
  --label "org.opencontainers.image.description=Kubernetes DRA control plane on kopf" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label "org.opencontainers.image.version=${VERSION}" \
  --out "$work/image.tar")

# The archive, its key and digest, its Debian packages as installed, and kopf-dra's wheel
# (tests compare it across builds).
mv "$work/image.tar" "$archive"
echo "$digest" > "$archive.digest"
cp "$work/installed" "$archive.packages"
rm -f "$out"/kopf_dra-*.whl
mv "$work"/build/kopf_dra-*.whl "$out/"
echo "$key" > "$archive.inputs"
# Downloads for other locks are of no further use.
find "$CACHE_ROOT/image/wheels" "$CACHE_ROOT/image/debs" -mindepth 1 -maxdepth 1 \
  ! -path "$wheels" ! -path "$debs" -exec rm -rf {} +
echo "kopf-dra image ${VERSION} (${NAME}, manifest ${digest}): root filesystem" \
  "$((rootfs_size / 1000000)) MB, archive $(($(stat -c %s "$archive") / 1000000)) MB," \
  "built in $(($(date +%s) - start))s" >&2
echo "$archive"
