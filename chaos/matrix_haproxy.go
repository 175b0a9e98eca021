package chaos

// The matrix's Workers reach the cluster through HAProxy (deploy/haproxy),
// which sends them to the node whose /readyz answers 200; the takeover-dex
// column uses the Go library's dex:/// target instead. Without haproxy
// installed every column uses dex:/// and the report says so.
func init() {
	if !HAProxyAvailable() {
		return
	}
	startBalancer = func(dir string, nodes []*Node) (string, func(), error) {
		h, err := StartHAProxy(HAProxyOptions{Dir: dir, Nodes: nodes})
		if err != nil {
			return "", nil, err
		}
		return h.Addr, func() { _ = h.Stop() }, nil
	}
}
