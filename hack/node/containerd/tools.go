//go:build tools

// Package containerd pins the containerd commands that the real-node e2e runs (hack/node/build.sh):
// the daemon, its runc shim and ctr, which imports the images.
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
