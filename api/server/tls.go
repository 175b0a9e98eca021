package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexhq/dex/api/tlsconf"
)

// serverCredentials serve mutual TLS when s is set, plaintext otherwise.
func serverCredentials(s *tlsconf.Store) grpc.ServerOption {
	if s == nil {
		return grpc.Creds(insecure.NewCredentials())
	}
	return grpc.Creds(s.ServerCredentials())
}
