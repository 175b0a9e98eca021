package harness

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Network is the fault layer of a cluster built with
// ClusterOptions.NetFaults: every directed raft link i→j between nodes
// goes through its own TCP proxy (the chaos build of dexd dials the proxy
// instead of the peer, see DEX_CHAOS_RAFT_ROUTES), so each link can be cut
// or slowed on its own. Node names are Node.ID ("n1", "n2", ...). A cut
// closes open connections and holds new ones silent; hashicorp/raft
// redials, so Heal restores the link without restarting anything. Only
// raft traffic is routed: the nodes' gRPC calls to each other (join,
// address registration, Status) are not cut.
//
// A raft connection carries the dialer's requests and their replies, so a
// one-way Cut(from, to) stops from's appends/votes to `to` (and their
// answers) while to's own requests to from still flow.
type Network interface {
	// Cut drops node from's raft traffic to node to (one way: to's
	// traffic to from still flows).
	Cut(from, to string)
	// Partition cuts the link between a and b both ways.
	Partition(a, b string)
	// Isolate cuts node from every other node, both ways.
	Isolate(node string)
	// Heal restores every link (cuts only; latency stays until set to 0).
	Heal()
	// Latency adds d to every write on the link from→to; 0 removes it.
	Latency(from, to string, d time.Duration)
}

// Net returns the cluster's fault layer, nil when the cluster was built
// without ClusterOptions.NetFaults.
//
// A Worker's connection is cut the same way with a WorkerLink (see
// workerlink.go): a proxy between one Worker and the nodes it dials.
func (c *Cluster) Net() Network {
	if c.net == nil {
		return nil
	}
	return c.net
}

// FailpointSlowDisk is evaluated by the chaos build of dexd before each
// write of raft log entries to the node's log store (cluster/internal/logstore/checkedlog.go
// StoreLogs): `sleep(200)` makes that one node's disk slow. Set it with
// SetFailpoints at start or SetFailpoint while the node runs.
const FailpointSlowDisk = "dexBeforeStoreLogs"

// WorkerLink is a TCP proxy per node between one Worker and the cluster's
// gRPC addresses: give the Worker Target() instead of Cluster.Target(),
// then Cut() drops its connections (open ones are closed) without killing
// the process, and Heal() lets it reconnect.
//
//	link, err := NewWorkerLink(c)
//	defer link.Close()
//	w := NewWorker(WorkerOptions{..., Target: link.Target()})
//	link.Cut(); ...; link.Heal()
type WorkerLink struct {
	proxies []*linkProxy
}

// RaftRoutesEnv is the chaos build's raft dial override: a node with
// DEX_CHAOS_RAFT_ROUTES="PEER_RAFT_ADDR=PROXY_ADDR[,...]" dials the proxy
// instead of the peer (cluster/internal/peer/chaos_routes.go).
const RaftRoutesEnv = "DEX_CHAOS_RAFT_ROUTES"

// netFaults is a cluster's Network: one linkProxy per directed link.
type netFaults struct {
	ids   []string
	links map[[2]string]*linkProxy // {from, to}
}

// newNetFaults starts a proxy per directed link between nodes and gives
// each node the routes of its outgoing links.
func newNetFaults(nodes []*Node) (*netFaults, error) {
	nf := &netFaults{links: map[[2]string]*linkProxy{}}
	for _, from := range nodes {
		nf.ids = append(nf.ids, from.ID)
		var routes []string
		for _, to := range nodes {
			if to == from {
				continue
			}
			p, err := newLinkProxy(to.RaftAddr)
			if err != nil {
				nf.Close()
				return nil, err
			}
			nf.links[[2]string{from.ID, to.ID}] = p
			routes = append(routes, to.RaftAddr+"="+p.Addr())
		}
		from.Env = append(from.Env, RaftRoutesEnv+"="+strings.Join(routes, ","))
	}
	return nf, nil
}

func (nf *netFaults) link(from, to string) *linkProxy {
	p := nf.links[[2]string{from, to}]
	if p == nil {
		panic(fmt.Sprintf("chaos: no raft link %s→%s (nodes %v)", from, to, nf.ids))
	}
	return p
}

func (nf *netFaults) Cut(from, to string) { nf.link(from, to).SetCut(true) }

func (nf *netFaults) Partition(a, b string) {
	nf.Cut(a, b)
	nf.Cut(b, a)
}

func (nf *netFaults) Isolate(node string) {
	if !slices.Contains(nf.ids, node) {
		panic(fmt.Sprintf("chaos: no node %s (nodes %v)", node, nf.ids))
	}
	for _, other := range nf.ids {
		if other != node {
			nf.Partition(node, other)
		}
	}
}

func (nf *netFaults) Heal() {
	for _, p := range nf.links {
		p.SetCut(false)
	}
}

func (nf *netFaults) Latency(from, to string, d time.Duration) { nf.link(from, to).SetLatency(d) }

// Close stops every proxy.
func (nf *netFaults) Close() {
	for _, p := range nf.links {
		p.Close()
	}
}

// CloseNet stops the proxies of a cluster built with NetFaults (after its
// nodes stopped); nothing without.
func (c *Cluster) CloseNet() {
	if c.net != nil {
		c.net.Close()
	}
}
