package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"go.uber.org/zap"

	"github.com/dexhq/dex/api/tlsconf"
)

// Peer is one member of the bootstrap configuration.
type Peer struct {
	ID       string
	RaftAddr string
}

// Config configures a Node.
type Config struct {
	ID       string
	DataDir  string
	RaftAddr string
	GRPCAddr string
	HTTPAddr string
	// Peers is the bootstrap configuration, used only on an empty data dir
	// when the node does not join a running cluster.
	Peers []Peer
	// Join is the gRPC address of a member to join through; the join itself
	// is done by Node.Join once the gRPC server is up.
	Join string

	Logger *zap.Logger

	// TLS, when set, puts mutual TLS under the raft transport (a peer must
	// hold a node certificate of the CA) and under this node's gRPC calls
	// to other nodes. Reloading it takes effect for new connections.
	TLS *tlsconf.Store

	// Raft timing; zero values take production defaults.
	HeartbeatTimeout  time.Duration
	ElectionTimeout   time.Duration
	StepDownTimeout   time.Duration
	CommitTimeout     time.Duration
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64

	// RegisterInterval is how often a follower checks that its addresses are
	// in the replicated state (default 500ms).
	RegisterInterval time.Duration

	// OnHalt is called when the state machine cannot apply a committed entry.
	// The node must stop; dexd exits.
	OnHalt func(error)

	// OnDamage is called when a raft log entry read while the node runs fails
	// its checksum (damage found at start is Open's error). The node must
	// stop; dexd exits. Without it, OnHalt is called.
	OnDamage func(error)

	// OnDiskFull is called, once, with a *DiskFullError when a write of the
	// raft log or of raft.db fails while the node runs because the data
	// dir's filesystem is full (a full disk at start is Open's error). The
	// node must stop; dexd exits. Without it, OnHalt is called.
	OnDiskFull func(error)

	// PeerDialOptions are added to this node's own gRPC calls to other
	// nodes (join, register, node state), after its transport credentials:
	// e.g. the token a cluster with ACLs requires.
	PeerDialOptions []grpc.DialOption

	// Partitions is the number of raft groups of the cluster, fixed when
	// it is bootstrapped (0 means 1): recorded in node.json, and a data
	// dir of another number is refused. A Node is one of them; a Host
	// holds them all.
	Partitions int
	// BalanceInterval is how often a Host's node checks that it leads no
	// more than its share of the partitions (0: DefaultBalanceInterval).
	BalanceInterval time.Duration

	// partition is the group this Node is (0 unless a Host opened it), and
	// share what the groups of a Host share.
	partition uint16
	share     *groupShare
}

func (c *Config) withDefaults() {
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	if c.StepDownTimeout == 0 {
		c.StepDownTimeout = DefaultStepDownTimeout
	}
	if c.StepDownTimeout > c.HeartbeatTimeout {
		c.StepDownTimeout = c.HeartbeatTimeout
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 50 * time.Millisecond
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.RegisterInterval == 0 {
		c.RegisterInterval = 500 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.BalanceInterval == 0 {
		c.BalanceInterval = DefaultBalanceInterval
	}
}

// ValidateAddr checks an H:P address: a non-empty host and a port 1-65535.
func ValidateAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", addr)
	}
	if host == "" {
		return fmt.Errorf("%q has no host (other nodes must be able to reach it)", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q has an invalid port", addr)
	}
	return nil
}

// ParsePeers parses "n1=H:P,n2=H:P,…" and rejects duplicate ids and
// duplicate addresses.
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	ids := map[string]bool{}
	addrs := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not ID=HOST:PORT", part)
		}
		if err := ValidateAddr(addr); err != nil {
			return nil, fmt.Errorf("--peers: node %s: %v", id, err)
		}
		if ids[id] {
			return nil, fmt.Errorf("--peers: node id %s appears twice", id)
		}
		if other, dup := addrs[addr]; dup {
			return nil, fmt.Errorf("--peers: nodes %s and %s have the same address %s", other, id, addr)
		}
		ids[id] = true
		addrs[addr] = id
		peers = append(peers, Peer{ID: id, RaftAddr: addr})
	}
	if len(peers) == 0 {
		return nil, fmt.Errorf("--peers is empty")
	}
	return peers, nil
}

// ClusterHash names a bootstrap configuration: equal peer lists give equal
// hashes whatever their order.
func ClusterHash(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.ID + "=" + p.RaftAddr
	}
	sort.Strings(parts)
	sum := sha256.Sum256([]byte(strings.Join(parts, ",")))
	return hex.EncodeToString(sum[:8])
}

// DefaultSnapshotInterval is how often a node checks whether its log has
// grown by SnapshotThreshold entries since its last snapshot. Raft draws the
// wait between one and two intervals, so with the 120 s of hashicorp/raft a
// node restarted more often than every 2–4 minutes never snapshots, and its
// log, and with it its next start, grows without bound.
const DefaultSnapshotInterval = 30 * time.Second
