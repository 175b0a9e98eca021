package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// minBootstrapSecret is the shortest secret --acl-bootstrap-token-file takes.
const minBootstrapSecret = 16

// security holds the flags of roles, tokens and the safe default.
type security struct {
	acl           bool
	bootstrapFile string
	token         string
	insecure      bool
	metricsPublic bool
	// tlsConfigured: the node serves gRPC and raft over mutual TLS. Set by
	// the TLS flags (--tls-cert/--tls-key/--tls-ca) where they exist.
	tlsConfigured bool

	metricsPublicSet bool
	bootstrapSecret  string
}

func (s *security) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&s.acl, "acl", false, "require a bearer token on every gRPC call (dexctl acl bootstrap makes the first admin token); /healthz, /readyz, health checks and reflection stay open")
	fs.StringVar(&s.bootstrapFile, "acl-bootstrap-token-file", "", "a file whose secret (at least 16 characters) becomes the first admin token when the cluster has none; implies --acl")
	fs.StringVar(&s.token, "token", "", "the token this node sends on its own calls to other nodes (join, register, status); default $DEX_TOKEN, else the bootstrap file's secret")
	fs.BoolVar(&s.insecure, "insecure", false, "allow a non-loopback address without TLS and tokens (anyone who reaches the ports can do anything)")
	fs.BoolVar(&s.metricsPublic, "metrics-public", true, "serve /metrics without a token; with --acl on a non-loopback --http-addr it defaults to false, and /metrics then takes an admin token as \"Authorization: Bearer <secret>\"")
}

// check runs after the other flags are parsed: it reads the bootstrap file
// and refuses a non-loopback address that is not secured.
func (s *security) check(fs *flag.FlagSet, o *options) error {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "metrics-public" {
			s.metricsPublicSet = true
		}
	})
	if s.bootstrapFile != "" {
		b, err := os.ReadFile(s.bootstrapFile)
		if err != nil {
			return &usageError{fmt.Sprintf("--acl-bootstrap-token-file: %v", err)}
		}
		s.bootstrapSecret = strings.TrimSpace(string(b))
		if len(s.bootstrapSecret) < minBootstrapSecret {
			return &usageError{fmt.Sprintf("--acl-bootstrap-token-file %s: the secret must be at least %d characters", s.bootstrapFile, minBootstrapSecret)}
		}
		s.acl = true
	}
	s.token = client.TokenFrom(s.token)
	if s.token == "" {
		s.token = s.bootstrapSecret
	}
	if !s.metricsPublicSet && s.acl && !isLoopback(o.httpAddr) {
		s.metricsPublic = false
	}
	if s.insecure || (s.tlsConfigured && s.acl) {
		return nil
	}
	for _, a := range []struct{ name, v string }{
		{"--grpc-addr", o.grpcAddr}, {"--raft-addr", o.raftAddr}, {"--http-addr", o.httpAddr},
	} {
		if !isLoopback(a.v) {
			return &usageError{fmt.Sprintf("%s %s is not a loopback address: refusing to serve it without TLS and tokens (give --tls-cert, --tls-key, --tls-ca and --acl, or --insecure)", a.name, a.v)}
		}
	}
	return nil
}

// isLoopback: 127.0.0.0/8, ::1 or localhost. A name is not resolved: only
// an address that cannot be reached from another host counts.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// peerDialOptions carry this node's token on its calls to other nodes.
func (s *security) peerDialOptions() []grpc.DialOption {
	if s.token == "" {
		return nil
	}
	return []grpc.DialOption{client.WithToken(s.token)}
}

// guardMetrics asks for an admin token on /metrics when it is not public.
func (s *security) guardMetrics(state func() *fsm.State, h http.Handler) http.Handler {
	if !s.acl || s.metricsPublic {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			tok := state().TokenBySecretHash(server.HashSecret(strings.TrimSpace(secret)))
			if !ok || tok == nil || tok.Revoked || tok.Role != fsmpb.TokenRole_TOKEN_ROLE_ADMIN {
				http.Error(w, "/metrics needs an admin token: Authorization: Bearer <secret> (or dexd --metrics-public)", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// gateReadiness keeps a leader not ready while the bootstrap file's token is
// not committed yet: a client that waits for readiness and then calls with
// that secret must not be refused as unknown.
func (s *security) gateReadiness(node *cluster.Node) {
	if s.bootstrapSecret == "" {
		return
	}
	node.AddReadyGate(func() (bool, string) {
		if node.State().HasTokens() {
			return true, ""
		}
		return false, "waiting for the token of --acl-bootstrap-token-file to commit"
	})
}

// bootstrapFromFile makes the bootstrap file's secret the first admin token:
// whichever node leads while the cluster has no token proposes it, and the
// state machine takes only the first.
func (s *security) bootstrapFromFile(ctx context.Context, node *cluster.Node, log *zap.Logger) {
	if s.bootstrapSecret == "" {
		return
	}
	for {
		st := node.State()
		if st.HasTokens() {
			if st.TokenBySecretHash(server.HashSecret(s.bootstrapSecret)) == nil {
				log.Warn("the cluster already has tokens: --acl-bootstrap-token-file is not a token of it")
			}
			return
		}
		if node.IsLeader() {
			res, err := node.Propose(ctx, server.BootstrapCommand("bootstrap-file", s.bootstrapSecret))
			switch {
			case err == nil && res.Err == nil:
				log.Info("ACL bootstrapped from --acl-bootstrap-token-file")
				return
			case err != nil && !errors.Is(err, context.Canceled):
				log.Debug("bootstrap token proposal failed; retrying", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
