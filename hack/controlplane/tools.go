//go:build tools

// Package controlplane pins the kube-apiserver command so that go mod tidy keeps its dependencies.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
