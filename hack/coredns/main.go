// Command coredns is CoreDNS with only the plugins our clusters' DNS uses: the local
// cluster's Corefile (hack/node.sh: cluster names only, nothing forwarded, because this
// machine reaches no outside resolver) and the one kubeadm writes in a kind node
// (hack/kind.sh), which adds prometheus, forward, loop and reload.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func init() {
	// Upstream's plugin.cfg order, which is the order queries pass the plugins in.
	dnsserver.Directives = []string{
		"reload", "bind", "ready", "health", "prometheus", "errors", "log", "loadbalance", "cache",
		"kubernetes", "loop", "forward", "whoami",
	}
}

func main() { coremain.Run() }
