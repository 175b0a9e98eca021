package chaos

import (
	"github.com/dexhq/dex/chaos/harness"
)

// The matrix's Workers reach the cluster through HAProxy (deploy/haproxy),
// which sends them to the node whose /readyz answers 200; the takeover-dex
// column uses the Go library's dex:/// target instead. Without haproxy
// installed every column uses dex:/// and the report says so.
func init() {
	if !harness.HAProxyAvailable() {
		return
	}
	startBalancer = func(dir string, nodes []*harness.Node) (string, func(), error) {
		h, err := harness.StartHAProxy(harness.HAProxyOptions{Dir: dir, Nodes: nodes})
		if err != nil {
			return "", nil, err
		}
		return h.Addr, func() { _ = h.Stop() }, nil
	}
}
