package cluster

import (
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/tlsconf"
	"github.com/dexhq/dex/cluster/internal/peer"
)

// The raft transport, its cluster handshake and mutual TLS live in
// internal/peer; these are the entry points tools and tests use.

// ForeignClusterError is a connection refused because the other side
// belongs to another cluster.
type ForeignClusterError = peer.ForeignClusterError

// ProbeClusterID asks the raft port at addr which cluster its node belongs
// to ("" while it does not know).
func ProbeClusterID(addr string, timeout time.Duration) (string, error) {
	return peer.ProbeClusterID(addr, nil, timeout)
}

// ProbeClusterIDTLS is ProbeClusterID over mutual TLS with the node
// certificate in peerTLS (plain TCP when nil).
func ProbeClusterIDTLS(addr string, peerTLS *tlsconf.Store, timeout time.Duration) (string, error) {
	return peer.ProbeClusterID(addr, peerTLS, timeout)
}

// NewPeerTransport is a raft transport on a loopback port of its own that
// speaks the handshake as a member of cluster clusterID: for tools and
// tests that talk raft to a node the way a peer does.
func NewPeerTransport(clusterID string) (*raft.NetworkTransport, error) {
	return peer.NewLoopbackTransport(clusterID, nil)
}

// NewPeerTransportTLS is NewPeerTransport over mutual TLS with the node
// certificate in peerTLS (plain TCP when nil).
func NewPeerTransportTLS(clusterID string, peerTLS *tlsconf.Store) (*raft.NetworkTransport, error) {
	return peer.NewLoopbackTransport(clusterID, peerTLS)
}

// DialCredentials are the credentials of this node's gRPC calls to other
// nodes: its node certificate when TLS is on, plaintext otherwise.
func (n *Node) DialCredentials() grpc.DialOption { return peer.DialCredentials(n.cfg.TLS) }
