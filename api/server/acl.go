package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// HashSecret is how a token's secret is kept in the state: lower-case hex
// SHA-256 of the secret as the client sends it.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// methodAccess is who may call a method.
type methodAccess int

const (
	accessAdmin  methodAccess = iota // admin tokens only
	accessClient                     // client (and admin) tokens
	accessWorker                     // worker (and admin) tokens
	accessOpen                       // no token needed
)

// BootstrapMethod needs no token: it works only while the cluster has none.
const BootstrapMethod = "/dex.v1.AdminService/BootstrapACL"

const nodeStateMethod = "/dex.v1.AdminService/NodeState"

// accessOf maps a full method name to who may call it. A method of a
// service not listed here is admin-only, so a new service is closed until
// someone decides otherwise.
func accessOf(fullMethod string) methodAccess {
	switch {
	case fullMethod == BootstrapMethod,
		strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/"),
		strings.HasPrefix(fullMethod, "/grpc.reflection."):
		return accessOpen
	case strings.HasPrefix(fullMethod, "/dex.v1.SessionService/"),
		// A schedule starts sessions a client could start itself.
		strings.HasPrefix(fullMethod, "/dex.v1.ScheduleService/"):
		return accessClient
	case strings.HasPrefix(fullMethod, "/dex.v1.WorkerService/"):
		return accessWorker
	}
	return accessAdmin
}

// acl checks every call's bearer token against this node's replicated state,
// so a token revoked through Raft is refused on each node once applied.
type acl struct {
	state func() *fsm.State
	// nodeToken is the token this node itself calls other nodes with. It is
	// taken for NodeState only, and only while this node's state has no
	// token at all: a joining node has not received the cluster's tokens
	// yet when the leader checks it with NodeState.
	nodeToken string
	// steps is the state the Steps of a worker token's attempts are in
	// (nil: state): a partition's own, while tokens are partition 0's.
	steps func() *fsm.State
}

// bearer returns the secret of "authorization: Bearer <secret>".
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return strings.TrimSpace(v[7:])
		}
	}
	return ""
}

func roleName(r dexv1.TokenRole) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "TOKEN_ROLE_"))
}

// authorize returns the caller's token, or the status that refuses the call.
// req is nil for a stream.
func (a *acl) authorize(ctx context.Context, fullMethod string, req any) error {
	need := accessOf(fullMethod)
	if need == accessOpen {
		return nil
	}
	secret := bearer(ctx)
	if secret == "" {
		return status.Error(codes.Unauthenticated, "this cluster requires a token: send \"authorization: Bearer <secret>\" (dexctl --token or $DEX_TOKEN)")
	}
	st := a.state()
	tok := st.TokenBySecretHash(HashSecret(secret))
	if tok == nil && fullMethod == nodeStateMethod && a.nodeToken != "" && !st.HasTokens() && subtle.ConstantTimeCompare([]byte(secret), []byte(a.nodeToken)) == 1 {
		return nil
	}
	if tok == nil {
		return status.Error(codes.Unauthenticated, "unknown token")
	}
	if tok.Revoked {
		return status.Errorf(codes.Unauthenticated, "token %s is revoked", tok.Id)
	}
	switch {
	case tok.Role == fsmpb.TokenRole_TOKEN_ROLE_ADMIN:
		return nil
	case need == accessClient && tok.Role == fsmpb.TokenRole_TOKEN_ROLE_CLIENT:
		return nil
	case need == accessWorker && tok.Role == fsmpb.TokenRole_TOKEN_ROLE_WORKER:
		if tok.WorkerId == "" {
			return nil
		}
		if a.steps != nil {
			st = a.steps()
		}
		return actsAs(st, tok, req)
	}
	return status.Errorf(codes.PermissionDenied, "a %s token may not call %s", roleName(dexv1.TokenRole(tok.Role)), fullMethod)
}

// actsAs lets a worker token bound to one Worker id act only as that Worker:
// register and poll with that id, and report only on attempts handed to it.
func actsAs(st *fsm.State, tok *fsmpb.AclToken, req any) error {
	switch r := req.(type) {
	case interface{ GetRef() *dexv1.AttemptRef }:
		ref := r.GetRef()
		if step := st.Step(ref.GetStepId()); step != nil {
			for _, at := range step.Attempts {
				if at.N == ref.GetAttempt() && at.WorkerId == tok.WorkerId {
					return nil
				}
			}
		}
		return status.Errorf(codes.PermissionDenied, "token %s may act only for Worker %s, and this attempt was not handed to it", tok.Id, tok.WorkerId)
	case interface{ GetWorkerId() string }:
		if r.GetWorkerId() == tok.WorkerId {
			return nil
		}
		return status.Errorf(codes.PermissionDenied, "token %s may act only as Worker %s, not %q", tok.Id, tok.WorkerId, r.GetWorkerId())
	}
	return status.Error(codes.PermissionDenied, fmt.Sprintf("token %s is bound to Worker %s and this call names no Worker", tok.Id, tok.WorkerId))
}

func (a *acl) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.authorize(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *acl) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.authorize(ss.Context(), info.FullMethod, nil); err != nil {
		return err
	}
	return handler(srv, ss)
}

// aclOptions are the interceptors that enforce tokens, when on.
func aclOptions(node interface{ State() *fsm.State }, on bool, nodeToken string) []grpc.ServerOption {
	if !on {
		return nil
	}
	a := &acl{state: node.State, nodeToken: nodeToken}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(a.unary), grpc.ChainStreamInterceptor(a.stream)}
}
