package cluster

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// PeerDialOptions are the options of this node's calls to other nodes:
// plaintext unless Config.PeerDialOptions say otherwise.
func (n *Node) PeerDialOptions() []grpc.DialOption {
	return append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, n.cfg.PeerDialOptions...)
}
