// Command pause is the sandbox ("infra") container of the real-node e2e: it holds the pod's
// namespaces and exits cleanly on SIGINT or SIGTERM, like the upstream pause image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
