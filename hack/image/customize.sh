#!/usr/bin/env bash
# mmdebstrap's customize hook for hack/image/build.sh (root mode): $1 is the new root
# filesystem, KOPF_DRA_IMAGE_BUILD the host directory with wheels/ and src/. Builds the venv
# in the chroot (hack/image/venv.sh, as the Dockerfile does) and adds the image's user.
set -euo pipefail
rootfs="$1"
build="${KOPF_DRA_IMAGE_BUILD:?set by hack/image/build.sh}"
mkdir "$rootfs/tmp/build"
cp -a "$build/wheels" "$build/src" "$rootfs/tmp/build/"
mkdir "$rootfs/tmp/build/dist"
# Nothing of the host's environment reaches the build but the timestamp.
chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LC_ALL=C.UTF-8 \
  SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:?}" /bin/bash /tmp/build/src/hack/image/venv.sh \
  /tmp/build/wheels /tmp/build/src /opt/kopf-dra /tmp/build/dist
cp "$rootfs"/tmp/build/dist/kopf_dra-*.whl "$build/"
rm -rf "$rootfs/tmp/build"
# uid 65532 with a name: what asks the passwd database (getpass, `id`) finds it. The Dockerfile
# adds the same two lines.
echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin' >> "$rootfs/etc/passwd"
echo 'nonroot:x:65532:' >> "$rootfs/etc/group"
