//go:build tools

// Package controlplane pins the commands built here so that go mod tidy keeps their dependencies:
// kube-apiserver for the local control plane, kube-scheduler and kube-controller-manager for
// the side-by-side benchmark (bench/bench_compare.py), the kubelet for the real-node e2e
// (hack/node/build.sh), kube-proxy and kubectl for the complete local cluster (hack/cluster/build.sh).
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
