package client

import (
	"context"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TokenEnv is the environment variable the Dex binaries read a token from
// when --token is not given.
const TokenEnv = "DEX_TOKEN"

// TokenCredentials sends an ACL token as "authorization: Bearer <secret>" on
// every call. It does not require transport security, so it works on a
// plaintext loopback channel too; on a real network use it with TLS.
type TokenCredentials struct{ Secret string }

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t TokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.Secret}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (TokenCredentials) RequireTransportSecurity() bool { return false }

var _ credentials.PerRPCCredentials = TokenCredentials{}

// WithToken is a Dial option that sends secret on every call; an empty
// secret sends nothing (a cluster without ACLs).
func WithToken(secret string) grpc.DialOption {
	if secret == "" {
		return grpc.EmptyDialOption{}
	}
	return grpc.WithPerRPCCredentials(TokenCredentials{Secret: secret})
}

// TokenFrom returns flag when set, else $DEX_TOKEN, trimmed.
func TokenFrom(flag string) string {
	if flag != "" {
		return strings.TrimSpace(flag)
	}
	return strings.TrimSpace(os.Getenv(TokenEnv))
}
