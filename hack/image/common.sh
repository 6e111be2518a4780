# Sourced by hack/image/build.sh and lock.sh (which set $here, their own directory): the repository
# root, the Python that runs pip, and the Debian mirrors.
root="$(cd "$here/../.." && pwd)"
# pip runs on the host (downloads, checked by hash): the project's venv has one, else python3.
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  [ -x "$root/.venv/bin/python" ] && PYTHON="$root/.venv/bin/python"
fi

# The mirrors of sources.list, into the array "mirrors" (the caller's, local or not).
read_mirrors() {
  mapfile -t mirrors < <(grep -v '^\s*\(#\|$\)' "$here/sources.list")
}
