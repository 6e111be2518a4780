// Only marks this directory as a module root: generate.sh builds main.go with each pinned
// release's own module file (hack/controlplane/<version>/go.mod, -modfile).
module kopf-dra.local/featuregates

go 1.26.0
