package client

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/dexhq/dex/api/tlsconf"
)

// WithTLS makes Dial's channel speak mutual TLS with the certificate, key
// and CA in s (see tlsconf.Load); a reload of s takes effect at the next
// connection. Each node's certificate must name the address the channel
// dials (a node of a dex:/// target, or the load balancer's host).
func WithTLS(s *tlsconf.Store) grpc.DialOption {
	creds := s.ClientCredentials()
	return tlsOption{DialOption: grpc.WithTransportCredentials(creds), creds: creds}
}

// tlsOption is a transport-credentials option that Dial recognises, so
// the liveness probes use the channel's credentials too.
type tlsOption struct {
	grpc.DialOption
	creds credentials.TransportCredentials
}

// DialOptions are the options of a channel with s's mutual TLS, or none
// when s is nil (plaintext): for callers that take TLS from flags.
func DialOptions(s *tlsconf.Store) []grpc.DialOption {
	if s == nil {
		return nil
	}
	return []grpc.DialOption{WithTLS(s)}
}
