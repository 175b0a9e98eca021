package tlsconf

import (
	"context"
	"net"

	"google.golang.org/grpc/credentials"
)

// ServerCredentials are gRPC server credentials with mutual TLS.
func (s *Store) ServerCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(s.ServerConfig("h2"))
}

// ClientCredentials are gRPC client credentials that take the store's
// current CA pool and certificate at every handshake; the server name is
// the address's host (or serverName when set).
func (s *Store) ClientCredentials() credentials.TransportCredentials {
	return &clientCreds{store: s, base: credentials.NewTLS(s.ClientConfig(""))}
}

type clientCreds struct {
	store      *Store
	serverName string
	base       credentials.TransportCredentials
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.store.ClientConfig(c.serverName)).ClientHandshake(ctx, authority, conn)
}

func (c *clientCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.base.ServerHandshake(conn)
}

func (c *clientCreds) Info() credentials.ProtocolInfo {
	i := c.base.Info()
	if c.serverName != "" {
		i.ServerName = c.serverName
	}
	return i
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

//nolint:staticcheck // part of the TransportCredentials interface
func (c *clientCreds) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}
