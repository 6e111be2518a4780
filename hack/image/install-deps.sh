#!/usr/bin/env bash
# Installs Debian's mmdebstrap, which hack/image/build.sh (make image) makes the image's root
# filesystem with, when it is missing. Needs root and apt-get, and does nothing elsewhere.
set -euo pipefail
command -v mmdebstrap >/dev/null && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "the image build needs mmdebstrap (a Debian package); not root with apt-get: not installed" >&2
  exit 0
fi
echo "installing mmdebstrap..." >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
