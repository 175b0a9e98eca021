package cluster

import (
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/dexhq/dex/cluster/internal/peer"
)

// A cluster of several partitions is several raft groups on the same
// voters (docs/design/partitions.md). A Host is one node of it: a Node per
// partition, each with its own log, stable store, snapshots and state
// machine, on one raft listener (the group named in each connection's
// handshake) and one cluster identity. Partition 0 keeps the layout and
// the handshake of a cluster of one, and it alone holds the cluster id and
// the nodes' addresses and runs the membership.

// PartitionRaftDir is where partition k keeps its raft stores: DATA/raft
// for partition 0, as before partitions; DATA/raft/p<k> for the others.
func PartitionRaftDir(dataDir string, k uint16) string {
	if k == 0 {
		return filepath.Join(dataDir, "raft")
	}
	return filepath.Join(dataDir, "raft", fmt.Sprintf("p%d", k))
}

// groupShare is what the partitions of one Host share.
type groupShare struct {
	listener *peer.Listener
	ident    *peer.ClusterIdentity
	// welcomed: partition 0 found a running cluster that names this node
	// but that it never held the data of, so no partition bootstraps.
	welcomed bool
	// registry is partition 0, whose state holds the nodes' addresses for
	// every partition.
	registry *Node
}

// Host is a node holding every partition of its cluster.
type Host struct {
	nodes    []*Node
	listener *peer.Listener
	balance  time.Duration
	stop     chan struct{}
	stopOnce sync.Once
	stopped  sync.WaitGroup
}

// NewHost opens a node's cfg.Partitions partitions as New opens one: it
// checks the data dir, opens each partition's stores and the raft
// listener they share, and starts nothing.
func NewHost(cfg Config) (_ *Host, err error) {
	cfg.withDefaults()
	if cfg.Partitions > math.MaxUint16 {
		return nil, fmt.Errorf("--partitions %d: at most %d", cfg.Partitions, math.MaxUint16)
	}
	if err := ValidateAddr(cfg.RaftAddr); err != nil {
		return nil, fmt.Errorf("raft address: %v", err)
	}
	ident, err := loadClusterIdentity(cfg.DataDir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	advertise, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("raft address %s: %v", cfg.RaftAddr, err)
	}
	ln, err := peer.Listen(cfg.RaftAddr, advertise, ident, cfg.Logger, cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("listen on raft address %s: %v", cfg.RaftAddr, err)
	}
	h := &Host{listener: ln, balance: cfg.BalanceInterval, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	share := &groupShare{listener: ln, ident: ident}
	for k := range cfg.Partitions {
		pc := cfg
		pc.partition, pc.share = uint16(k), share
		n, err := New(pc)
		if err != nil {
			if k > 0 {
				err = fmt.Errorf("partition %d: %w", k, err)
			}
			return nil, err
		}
		if k == 0 {
			share.registry = n
		}
		h.nodes = append(h.nodes, n)
	}
	return h, nil
}

// Start starts every partition, each with the hooks hooks gives it.
func (h *Host) Start(hooks func(partition int) Hooks) error {
	for k, n := range h.nodes {
		if err := n.Start(hooks(k)); err != nil {
			h.stopStarted(k)
			if k > 0 {
				err = fmt.Errorf("partition %d: %w", k, err)
			}
			return err
		}
	}
	if len(h.nodes) > 1 {
		h.stopped.Add(1)
		go func() {
			defer h.stopped.Done()
			h.balanceLoop(h.stop, h.balance)
		}()
	}
	return nil
}

// Partitions is the number of partitions the host holds.
func (h *Host) Partitions() int { return len(h.nodes) }

// Partition is partition k's Node.
func (h *Host) Partition(k int) *Node { return h.nodes[k] }

// Nodes is every partition's Node, partition 0 first.
func (h *Host) Nodes() []*Node { return h.nodes }

// Shutdown stops every partition, then the listener they share.
func (h *Host) Shutdown() error {
	h.stopOnce.Do(func() { close(h.stop) })
	h.stopped.Wait()
	var errs []error
	for _, n := range h.nodes {
		errs = append(errs, n.Shutdown())
	}
	errs = append(errs, h.listener.Close())
	return errors.Join(errs...)
}

// stopStarted shuts down the partitions before the k-th (started) and
// closes what the others opened.
func (h *Host) stopStarted(k int) {
	for _, n := range h.nodes[:k] {
		_ = n.Shutdown()
	}
	for _, n := range h.nodes[k+1:] {
		n.closeUnstarted()
	}
	_ = h.listener.Close()
}

// close closes what NewHost opened when it fails part way.
func (h *Host) close() {
	for _, n := range h.nodes {
		n.closeUnstarted()
	}
	_ = h.listener.Close()
}

// closeUnstarted closes what New opened, for a node that will not start.
func (n *Node) closeUnstarted() {
	if n.prep == nil {
		return // started, and stopped by Shutdown
	}
	n.prep = nil
	_ = n.trans.Close()
	_ = n.wal.Close()
	_ = n.store.Close()
}
