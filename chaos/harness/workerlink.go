package harness

import "strings"

// NewWorkerLink starts a proxy in front of every node's gRPC address.
func NewWorkerLink(c *Cluster) (*WorkerLink, error) {
	l := &WorkerLink{}
	for _, n := range c.Nodes {
		p, err := newLinkProxy(n.GRPCAddr)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.proxies = append(l.proxies, p)
	}
	return l, nil
}

// Target is the Worker's --addr: the proxies, in the nodes' order.
func (l *WorkerLink) Target() string {
	var addrs []string
	for _, p := range l.proxies {
		addrs = append(addrs, p.Addr())
	}
	return "dex:///" + strings.Join(addrs, ",")
}

// Cut closes the Worker's connections to every node and holds new ones silent.
func (l *WorkerLink) Cut() {
	for _, p := range l.proxies {
		p.SetCut(true)
	}
}

// Heal lets the Worker connect again.
func (l *WorkerLink) Heal() {
	for _, p := range l.proxies {
		p.SetCut(false)
	}
}

// Close stops the proxies.
func (l *WorkerLink) Close() {
	for _, p := range l.proxies {
		p.Close()
	}
}
