// A minimal CoreDNS for the test node: only what cluster DNS needs to answer
// Service and pod names from the API server (kubernetes), with a short cache and
// round-robin answers. No forward plugin: nothing is ever resolved off the machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
)

// The order plugins run in within a server block (CoreDNS's own plugin.cfg order).
var directives = []string{
	"cache",
	"loadbalance",
	"kubernetes",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
