#!/usr/bin/env bash
# Builds the image's virtualenv PREFIX with Debian's python3 from the locked wheels in WHEELS
# and kopf-dra's sources in SRC: hack/image/build.sh runs it in the new root filesystem, the
# Dockerfile in its build stage, so both images get the same /opt/kopf-dra. Copies kopf-dra's
# wheel into DIST when given (build.sh compares it across builds).
#
# usage: venv.sh WHEELS SRC PREFIX [DIST]
set -euo pipefail
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  echo "usage: $0 WHEELS SRC PREFIX [DIST]" >&2
  exit 2
fi
wheels=$1 src=$2 prefix=$3 dist=${4:-}
locks="$src/hack/image"
umask 022
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
pip_wheels=("$wheels"/pip-*.whl)
if [ ${#pip_wheels[@]} != 1 ] || [ ! -f "${pip_wheels[0]}" ]; then
  echo "venv.sh: expected one pip wheel in $wheels (build-requirements.lock)" >&2
  exit 1
fi
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
# pip and the build backend, outside the image's venv: a wheel of pip runs as it is.
python3 -m venv --without-pip "$tools/venv"
"$tools/venv/bin/python" "${pip_wheels[0]}/pip" install -q --no-index --find-links "$wheels" \
  --require-hashes --no-deps --no-compile -r "$locks/build-requirements.lock"
pip=("$tools/venv/bin/python" -m pip)
# kopf-dra's wheel (setuptools takes its timestamps from SOURCE_DATE_EPOCH).
"${pip[@]}" wheel -q --no-deps --no-build-isolation --no-index --wheel-dir "$tools/dist" "$src"
python3 -m venv --without-pip "$prefix"
"${pip[@]}" --python "$prefix/bin/python" install -q --no-index --find-links "$wheels" \
  --require-hashes --no-deps --no-compile -r "$locks/requirements.lock"
# By name from the wheel's directory, not by its path: a path would be recorded
# (direct_url.json), and the temporary directory's name differs from build to build.
"${pip[@]}" --python "$prefix/bin/python" install -q --no-index --find-links "$tools/dist" \
  --no-deps --no-compile kopf-dra
# Byte code once, here, since the root filesystem is read-only at run time: checked against the
# sources' hashes rather than their mtimes, with a fixed hash seed (the order of frozenset
# constants), one file after another, so that two builds write the same bytes.
PYTHONHASHSEED=0 "$prefix/bin/python" -m compileall -q --invalidation-mode checked-hash "$prefix/lib"
if [ -n "$dist" ]; then cp "$tools"/dist/kopf_dra-*.whl "$dist/"; fi
