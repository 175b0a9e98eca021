package peer

import (
	"crypto/tls"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexhq/dex/api/tlsconf"
)

// dialRaft opens a connection to a raft port: over mutual TLS (the peer's
// certificate must name the host of addr) when peerTLS is set.
func dialRaft(peerTLS *tlsconf.Store, addr string, timeout time.Duration) (net.Conn, error) {
	if peerTLS == nil {
		return net.DialTimeout("tcp", raftDialAddr(addr), timeout)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", raftDialAddr(addr), peerTLS.ClientConfig(host))
}

// DialCredentials are the credentials of a node's gRPC calls to other
// nodes: its node certificate when TLS is on, plaintext otherwise.
func DialCredentials(s *tlsconf.Store) grpc.DialOption {
	if s == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(s.ClientCredentials())
}
