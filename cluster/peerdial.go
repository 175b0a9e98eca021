package cluster

import (
	"google.golang.org/grpc"
)

// PeerDialOptions are the options of this node's calls to other nodes: its
// transport credentials (DialCredentials), then Config.PeerDialOptions
// (e.g. the token a cluster with ACLs requires).
func (n *Node) PeerDialOptions() []grpc.DialOption {
	return append([]grpc.DialOption{n.DialCredentials()}, n.cfg.PeerDialOptions...)
}
