# Sourced by every build script, so that they all build the same Kubernetes release the same way.
# Sets K8S_VERSION (KOPF_DRA_KUBERNETES_VERSION when set, else VERSION, the default), refused
# unless VERSIONS lists it; MODULE_DIR, that version's Go module (go.mod, go.sum, tools.go, written
# by gen-go-mod.sh); CACHE_ROOT, the per-user cache whose ${K8S_VERSION}/ holds what is built.
# k8s_ldflags <program> prints the -ldflags that stamp a Kubernetes command with the version.
controlplane_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION="${KOPF_DRA_KUBERNETES_VERSION:-$(cat "$controlplane_dir/VERSION")}"
if ! grep -qxF -- "$K8S_VERSION" "$controlplane_dir/VERSIONS"; then
  echo "${KOPF_DRA_KUBERNETES_VERSION:+KOPF_DRA_KUBERNETES_VERSION=}${K8S_VERSION}: not a supported" \
    "Kubernetes version; supported: $(paste -sd' ' "$controlplane_dir/VERSIONS") (hack/controlplane/VERSIONS)" >&2
  exit 1
fi
MODULE_DIR="$controlplane_dir/$K8S_VERSION"
[ -f "$MODULE_DIR/go.mod" ] || { echo "no $MODULE_DIR/go.mod: run gen-go-mod.sh ${K8S_VERSION}" >&2; exit 1; }
CACHE_ROOT="${KOPF_DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-dra}"
source "$controlplane_dir/toolchain.sh"
toolchain=$(go_toolchain_for "$MODULE_DIR/go.mod")
[ -z "$toolchain" ] || export GOTOOLCHAIN="$toolchain"

k8s_ldflags() {
  local pkg=k8s.io/component-base/version
  local minor
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  echo "-s -w -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}" \
    "-X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z" \
    "-X ${pkg}/verflag.programName=$1"
}
