package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
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
	raftAddr, grpcAddr := freeAddr(t), freeAddr(t)
	node, err := cluster.Open(cluster.Config{
		ID: "n1", DataDir: t.TempDir(), RaftAddr: raftAddr, GRPCAddr: grpcAddr,
		Peers:            []cluster.Peer{{ID: "n1", RaftAddr: raftAddr}},
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(node, zap.NewNop(), Options{ACL: true, Dispatch: noTasks{}, Leases: noLeases{}})
	go srv.Serve(lis)
	t.Cleanup(func() {
		srv.Stop(time.Second)
		_ = node.Shutdown()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ok, _ := node.Ready(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the node never became ready")
		}
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return node, srv, conn
}

// addToken records a token with a known secret straight through Raft.
func addToken(t *testing.T, node *cluster.Node, id string, role dexv1.TokenRole, worker string) string {
	t.Helper()
	secret := "secret-of-" + id
	res, err := node.Propose(context.Background(), &dexv1.Command{Body: &dexv1.Command_CreateToken{CreateToken: &dexv1.CreateToken{Token: &dexv1.AclToken{
		Id: id, Name: id, Role: role, WorkerId: worker, SecretSha256: HashSecret(secret),
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
	if err := s.SendMsg(req); err != nil {
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
	if res, err := node.Propose(context.Background(), &dexv1.Command{Body: &dexv1.Command_RevokeToken{RevokeToken: &dexv1.RevokeToken{TokenId: "t-revoked"}}}); err != nil || res.Err != nil {
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
		{"client", clientSecret, func(s string) bool { return s == "dex.v1.SessionService" }, codes.PermissionDenied},
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
