// The pod sandbox's first process, as registry.k8s.io/pause is (no registry is reachable here):
// it holds the pod's namespaces, reaps the orphans the kernel hands it, and exits on SIGTERM or
// SIGINT, which the kubelet sends when the pod goes.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
