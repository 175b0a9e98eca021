package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// noTasks answers every poll at once with nothing.
type noTasks struct{}

func (noTasks) Poll(context.Context, string, int, time.Duration) ([]*dexv1.Task, error) {
	return nil, nil
}

// aclNode starts a one-node cluster serving every service with ACLs on and
// returns the node, its server and a plaintext channel to it.
func aclNode(t *testing.T) (*cluster.Node, *Server, *grpc.ClientConn) {
	t.Helper()
	return aclNodeWith(t, "")
}

// aclNodeWith is aclNode for a node that calls other nodes with nodeToken.
func aclNodeWith(t *testing.T, nodeToken string) (*cluster.Node, *Server, *grpc.ClientConn) {
	t.Helper()
	return serveSingleNode(t, Options{ACL: true, NodeToken: nodeToken, Dispatch: noTasks{}, Deadlines: noDeadlines{}})
}

// addToken records a token with a known secret straight through Raft.
func addToken(t *testing.T, node *cluster.Node, id string, role dexv1.TokenRole, worker string) string {
	t.Helper()
	secret := "secret-of-" + id
	res, err := node.Propose(context.Background(), &fsmpb.Command{Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Token: &fsmpb.AclToken{
		Id: id, Name: id, Role: fsmpb.TokenRole(role), WorkerId: worker, SecretSha256: HashSecret(secret),
	}}}})
	if err != nil || res.Err != nil {
		t.Fatalf("create token %s: %v %v", id, err, res.Err)
	}
	return secret
}

func withBearer(ctx context.Context, secret string) context.Context {
	if secret == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+secret)
}

// dexMethods lists every RPC of every service of the dex.v1 package, from
// the generated descriptors, so a new RPC is in the table by itself.
func dexMethods(t *testing.T) []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("dex.v1", func(f protoreflect.FileDescriptor) bool {
		for i := 0; i < f.Services().Len(); i++ {
			ms := f.Services().Get(i).Methods()
			for j := 0; j < ms.Len(); j++ {
				out = append(out, ms.Get(j))
			}
		}
		return true
	})
	if len(out) < 20 {
		t.Fatalf("found only %d dex.v1 methods", len(out))
	}
	return out
}

// call invokes m with an empty request and returns the status code.
func call(ctx context.Context, conn *grpc.ClientConn, m protoreflect.MethodDescriptor) codes.Code {
	full := fmt.Sprintf("/%s/%s", m.Parent().FullName(), m.Name())
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
	if err != nil {
		panic(err)
	}
	req := mt.New().Interface()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !m.IsStreamingServer() && !m.IsStreamingClient() {
		out, _ := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
		return status.Code(conn.Invoke(ctx, full, req, out.New().Interface()))
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: m.IsStreamingServer(), ClientStreams: m.IsStreamingClient()}, full)
	if err != nil {
		return status.Code(err)
	}
	// A refusal can end the stream before the request is sent: SendMsg then
	// says io.EOF and the status comes with RecvMsg.
	if err := s.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return status.Code(err)
	}
	_ = s.CloseSend()
	out, _ := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	return status.Code(s.RecvMsg(out.New().Interface()))
}

// stateDigest is what a refused call must not change.
func stateDigest(node *cluster.Node) string {
	st := node.State()
	var b strings.Builder
	for _, s := range st.Sessions() {
		b.WriteString(prototext.Format(s))
	}
	for _, tok := range st.Tokens() {
		b.WriteString(prototext.Format(tok))
	}
	ws, _ := st.WorkersWatch()
	for _, w := range ws {
		b.WriteString(prototext.Format(w))
	}
	for _, n := range st.Nodes() {
		b.WriteString(prototext.Format(n))
	}
	return b.String()
}

func TestACL_EveryRPCAnswersEachRoleAsItsTableSays(t *testing.T) {
	node, srv, conn := aclNode(t)
	adminSecret := addToken(t, node, "t-admin", dexv1.TokenRole_TOKEN_ROLE_ADMIN, "")
	clientSecret := addToken(t, node, "t-client", dexv1.TokenRole_TOKEN_ROLE_CLIENT, "")
	workerSecret := addToken(t, node, "t-worker", dexv1.TokenRole_TOKEN_ROLE_WORKER, "")
	revokedSecret := addToken(t, node, "t-revoked", dexv1.TokenRole_TOKEN_ROLE_ADMIN, "")
	if res, err := node.Propose(context.Background(), &fsmpb.Command{Body: &fsmpb.Command_RevokeToken{RevokeToken: &fsmpb.RevokeToken{TokenId: "t-revoked"}}}); err != nil || res.Err != nil {
		t.Fatalf("revoke: %v %v", err, res.Err)
	}

	registered := srv.GRPC().GetServiceInfo()
	callers := []struct {
		name, secret string
		// allowed says whether this caller may call a method of service.
		allowed func(service string) bool
		refusal codes.Code
	}{
		{"no token", "", func(string) bool { return false }, codes.Unauthenticated},
		{"unknown token", "not-a-token", func(string) bool { return false }, codes.Unauthenticated},
		{"revoked admin token", revokedSecret, func(string) bool { return false }, codes.Unauthenticated},
		{"admin", adminSecret, func(string) bool { return true }, codes.OK},
		{"client", clientSecret, func(s string) bool { return s == "dex.v1.SessionService" || s == "dex.v1.ScheduleService" }, codes.PermissionDenied},
		{"worker", workerSecret, func(s string) bool { return s == "dex.v1.WorkerService" }, codes.PermissionDenied},
	}
	for _, m := range dexMethods(t) {
		service := string(m.Parent().FullName())
		if _, ok := registered[service]; !ok {
			t.Fatalf("service %s is not served", service)
		}
		full := fmt.Sprintf("/%s/%s", service, m.Name())
		for _, c := range callers {
			t.Run(full+"/"+c.name, func(t *testing.T) {
				before := stateDigest(node)
				got := call(withBearer(context.Background(), c.secret), conn, m)
				allowed := c.allowed(service) || full == BootstrapMethod
				if allowed {
					if got == codes.Unauthenticated || got == codes.PermissionDenied {
						t.Fatalf("%s: %v; want the call let through", c.name, got)
					}
					return
				}
				if got != c.refusal {
					t.Fatalf("%s: %v; want %v", c.name, got, c.refusal)
				}
				if after := stateDigest(node); after != before {
					t.Fatal("a refused call changed the state")
				}
			})
		}
	}

	// Health stays open for load balancers and the client's health checks.
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
}

// A joining node has none of the cluster's tokens yet when the leader asks
// it for NodeState with the token both nodes were started with: it takes
// that token for NodeState only, and only until its state has tokens.
func TestACL_TheNodesOwnTokenOpensNodeStateOnlyBeforeTheTokensArrive(t *testing.T) {
	node, _, conn := aclNodeWith(t, "the-nodes-own-token")
	admin := dexv1.NewAdminServiceClient(conn)
	ctx := withBearer(context.Background(), "the-nodes-own-token")
	if _, err := admin.NodeState(ctx, &dexv1.NodeStateRequest{}); err != nil {
		t.Fatalf("NodeState with the node's token before any token: %v", err)
	}
	if _, err := admin.ListTokens(ctx, &dexv1.ListTokensRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListTokens with the node's token: %v; want Unauthenticated", err)
	}
	if _, err := admin.CreateToken(ctx, &dexv1.CreateTokenRequest{Name: "x", Role: dexv1.TokenRole_TOKEN_ROLE_ADMIN}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("CreateToken with the node's token: %v; want Unauthenticated", err)
	}
	if node.State().HasTokens() {
		t.Fatal("a refused call made a token")
	}
	if _, err := admin.NodeState(context.Background(), &dexv1.NodeStateRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("NodeState without a token: %v; want Unauthenticated", err)
	}
	addToken(t, node, "t-admin", dexv1.TokenRole_TOKEN_ROLE_ADMIN, "")
	if _, err := admin.NodeState(ctx, &dexv1.NodeStateRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("NodeState with the node's token once tokens exist: %v; want Unauthenticated", err)
	}
}

// BootstrapACL answers the first admin token once; a second call is refused.
func TestACL_BootstrapWorksOnceWithoutAToken(t *testing.T) {
	_, _, conn := aclNode(t)
	admin := dexv1.NewAdminServiceClient(conn)
	ctx := context.Background()
	boot, err := admin.BootstrapACL(ctx, &dexv1.BootstrapACLRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if boot.Secret == "" || boot.Token.GetRole() != dexv1.TokenRole_TOKEN_ROLE_ADMIN || len(boot.Token.ProtoReflect().GetUnknown()) != 0 {
		t.Fatalf("bootstrap answered %v", boot)
	}
	if _, err := admin.BootstrapACL(ctx, &dexv1.BootstrapACLRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second bootstrap: %v; want FailedPrecondition", err)
	}
	as := withBearer(ctx, boot.Secret)
	made, err := admin.CreateToken(as, &dexv1.CreateTokenRequest{Name: "w", Role: dexv1.TokenRole_TOKEN_ROLE_WORKER, WorkerId: "w1"})
	if err != nil || made.Secret == "" || made.Token.GetCreatedAtMs() == 0 {
		t.Fatalf("create token: %v %v", made, err)
	}
	for name, req := range map[string]*dexv1.CreateTokenRequest{
		"no name":      {Role: dexv1.TokenRole_TOKEN_ROLE_CLIENT},
		"no role":      {Name: "x"},
		"client bound": {Name: "x", Role: dexv1.TokenRole_TOKEN_ROLE_CLIENT, WorkerId: "w1"},
	} {
		if _, err := admin.CreateToken(as, req); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: %v; want InvalidArgument", name, err)
		}
	}
	if _, err := admin.RevokeToken(as, &dexv1.RevokeTokenRequest{TokenId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("revoke unknown: %v; want NotFound", err)
	}
	list, err := admin.ListTokens(as, &dexv1.ListTokensRequest{})
	if err != nil || len(list.Tokens) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	for _, tk := range list.Tokens {
		// The API's type has no field for the hash; an answer that carried
		// one anyway would arrive as an unknown field.
		if len(tk.ProtoReflect().GetUnknown()) != 0 {
			t.Fatalf("ListTokens shows a field the API does not define (the hash?): %v", tk)
		}
	}
	if _, err := admin.RevokeToken(as, &dexv1.RevokeTokenRequest{TokenId: boot.Token.Id}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ListTokens(as, &dexv1.ListTokensRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("the revoked bootstrap token: %v; want Unauthenticated", err)
	}
}
