"""The local cluster (kube-apiserver and etcd, real kubelets, the complete cluster) that the
demo, the tests and the benchmarks run against; no deployed component imports it (see
docs/architecture.md, Layers)."""
