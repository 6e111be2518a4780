# Sourced by the build scripts. go_toolchain_for GO.MOD prints the toolchain to build that module
# with when it needs a newer Go than the machine's (1.38 needs 1.27): GO_TOOLCHAIN's, which the go
# command fetches from the Go module proxy; nothing when the machine's Go will do.
toolchain_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go_toolchain_for() {
  local need have
  need=$(awk '$1 == "go" {print $2; exit}' "$1")
  have=$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null | sed 's/^go//')
  if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
    cat "$toolchain_dir/GO_TOOLCHAIN"
  fi
}
