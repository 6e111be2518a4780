// The embedded etcd, a module of its own so that every Kubernetes version's module
// (../v1.X.Y/go.mod, by a replace) builds this one source with the etcd that release requires.
module kopf-dra.local/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 v3.6.8
