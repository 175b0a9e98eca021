package cluster_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// recorder is a leader service that counts what the leadership loop did to it.
type recorder struct {
	mu                          sync.Mutex
	established, revoked, drain int
	running                     bool
}

func (r *recorder) EstablishLeadership(context.Context, uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.established++
	r.running = true
	return nil
}

func (r *recorder) RevokeLeadership() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revoked++
	r.running = false
}

func (r *recorder) Drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain++
}

func (r *recorder) counts() (established, revoked, drain int, running bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.established, r.revoked, r.drain, r.running
}

func healthOf(t *testing.T, addr, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn := dialConn(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.Status
}

// A draining leader is not ready and no longer serves polls, but still
// serves the calls of running attempts and keeps leading; Handover then
// stops its services for good and hands leadership to another voter.
func TestDrainThenHandover(t *testing.T) {
	c := newCluster(t, 3)
	recs := map[string]*recorder{}
	for _, n := range c.nodes {
		recs[n.id] = &recorder{}
	}
	c.services = func(id string) []cluster.LeaderService { return []cluster.LeaderService{recs[id]} }
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	rec := recs[leader.id]
	waitFor(t, 5*time.Second, "the leader's service runs", func() bool { _, _, _, running := rec.counts(); return running })

	leader.node.Drain()
	if ok, reason := leader.node.Ready(); ok || !strings.HasPrefix(reason, "draining") {
		t.Fatalf("draining leader: ready %v (%q); want not ready, draining", ok, reason)
	}
	if ok, reason := leader.node.ServesAttempts(); !ok {
		t.Fatalf("draining leader does not serve running attempts: %s", reason)
	}
	if !leader.node.IsLeader() {
		t.Fatal("draining leader stepped down before Handover")
	}
	if _, _, drained, running := rec.counts(); drained != 1 || !running {
		t.Fatalf("service drained %d times, running %v; want drained once and still running", drained, running)
	}
	waitFor(t, 2*time.Second, "health follows the drain", func() bool {
		return healthOf(t, leader.grpcAddr, "dex.v1.WorkerService") == healthpb.HealthCheckResponse_SERVING &&
			healthOf(t, leader.grpcAddr, "dex.v1.Dispatch") == healthpb.HealthCheckResponse_NOT_SERVING &&
			healthOf(t, leader.grpcAddr, "dex.v1.SessionService") == healthpb.HealthCheckResponse_NOT_SERVING
	})
	// New client work is refused with Unavailable; the draining node still commits.
	_, err := dexv1.NewSessionServiceClient(dialConn(t, leader.grpcAddr)).CreateSession(context.Background(),
		&dexv1.CreateSessionRequest{SessionId: "s-drain", Message: "hi"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "draining") {
		t.Fatalf("CreateSession on a draining leader: %v; want Unavailable, draining", err)
	}
	if _, err := leader.node.Propose(context.Background(), &fsmpb.Command{Body: &fsmpb.Command_CreateSession{
		CreateSession: &fsmpb.CreateSession{SessionId: "s-drain", Message: "hi"}}}); err != nil {
		t.Fatalf("propose on a draining leader: %v", err)
	}

	if err := leader.node.Handover(); err != nil {
		t.Fatalf("handover: %v", err)
	}
	if leader.node.IsLeader() {
		t.Fatal("still leader after Handover")
	}
	est, revoked, _, running := rec.counts()
	if running || revoked == 0 {
		t.Fatalf("service after Handover: running %v, revoked %d", running, revoked)
	}
	next := c.readyLeader()
	if next == leader {
		t.Fatal("the handed-over node is ready again")
	}
	if ok, _ := leader.node.ServesAttempts(); ok {
		t.Fatal("the handed-over node still serves attempts")
	}
	waitFor(t, 2*time.Second, "the old leader's Worker health goes NOT_SERVING", func() bool {
		return healthOf(t, leader.grpcAddr, "dex.v1.WorkerService") == healthpb.HealthCheckResponse_NOT_SERVING
	})
	_, err = leader.node.Propose(context.Background(), &fsmpb.Command{Body: &fsmpb.Command_CreateSession{
		CreateSession: &fsmpb.CreateSession{SessionId: "s-after", Message: "hi"}}})
	if !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("propose on the handed-over node: %v; want ErrNotLeader", err)
	}

	// Even if leadership comes back to it, the handed-over node establishes
	// nothing any more.
	if _, err := next.node.TransferLeadership(context.Background(), leader.id); err != nil {
		t.Fatalf("transfer back: %v", err)
	}
	waitFor(t, 5*time.Second, "the handed-over node leads again", leader.node.IsLeader)
	time.Sleep(1500 * time.Millisecond) // past the leadership loop's catch-up tick
	if est2, _, _, running := rec.counts(); est2 != est || running {
		t.Fatalf("handed-over node established its services again (%d -> %d, running %v)", est, est2, running)
	}
	if ok, reason := leader.node.Ready(); ok || !strings.HasPrefix(reason, "draining") {
		t.Fatalf("handed-over leader: ready %v (%q)", ok, reason)
	}
}

func dialConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
