// A CoreDNS with only the plugins cluster DNS needs (the local cluster's kube-dns: Service
// names, readiness and health), built from the Go module proxy like the other pieces.
// Leaving out `forward` is deliberate: the local cluster resolves its own names and nothing
// else, so no pod's lookup ever leaves this machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// The order requests pass through them, as in CoreDNS's own plugin.cfg.
	dnsserver.Directives = []string{
		"ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes",
	}
}

func main() {
	coremain.Run()
}
