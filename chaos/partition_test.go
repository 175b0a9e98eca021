//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// newNetEnv is newEnv on the chaos build with every raft link behind a
// proxy of the harness (Cluster.Net), each node with a gofail HTTP
// endpoint (returned per node) and the failpoint terms.
func newNetEnv(t *testing.T, terms string) (*env, map[*harness.Node]string) {
	t.Helper()
	bin := chaosBinDir(t)
	dir := t.TempDir()
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: bin, Dir: dir, Args: fastArgs, NetFaults: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseNet)
	e := &env{t: t, dir: dir, cluster: c, ledger: filepath.Join(dir, "ledger.jsonl")}
	t.Cleanup(e.stop)
	fpHTTP := map[*harness.Node]string{}
	for _, n := range c.Nodes {
		addr, err := harness.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		fpHTTP[n] = addr
		if err := harness.SetFailpoints(n, terms, addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitReady()
	conn, err := client.Dial(c.Target(), c.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	e.conn, e.client = conn, client.New(conn)
	return e, fpHTTP
}

// serveOne creates a session and waits until its turn is done.
func (e *env) serveOne(msg string) string {
	e.t.Helper()
	id := e.createSession(msg)
	e.waitStatus(id, sIdle, 90*time.Second)
	return id
}

// raftState asks one node of c for its own raft view, over c's TLS and
// token when they are on.
func raftState(t *testing.T, c *harness.Cluster, n *harness.Node) *dexv1.NodeStateResponse {
	t.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr, c.ConnOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := dexv1.NewAdminServiceClient(conn).NodeState(ctx, &dexv1.NodeStateRequest{})
	if err != nil {
		t.Fatalf("%s NodeState: %v", n.ID, err)
	}
	return r
}

// converged reports whether every node applied the same index in the same
// term under the same leader.
func converged(t *testing.T, c *harness.Cluster) (bool, string) {
	var first *dexv1.NodeStateResponse
	var desc string
	same := true
	for _, n := range c.Nodes {
		s := raftState(t, c, n)
		desc += fmt.Sprintf(" %s:%s term %d applied %d leader %q;", n.ID, s.State, s.Term, s.AppliedIndex, s.LeaderId)
		if first == nil {
			first = s
			continue
		}
		if s.Term != first.Term || s.AppliedIndex != first.AppliedIndex || s.LeaderId != first.LeaderId || s.LeaderId == "" {
			same = false
		}
	}
	return same, desc
}

func waitConverged(t *testing.T, c *harness.Cluster, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, desc := converged(t, c)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes did not converge within %s:%s", d, desc)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The leader is cut from both followers: they elect a new leader and serve
// a session while the old one cannot commit (its /readyz/leader says 503). Healed,
// the old leader rejoins as a follower with the same log.
func TestPartition_IsolatedLeaderIsReplacedAndRejoinsAsFollower(t *testing.T) {
	e, _ := newNetEnv(t, "")
	e.startWorker("")
	before := e.serveOne("before the partition")

	old := e.leader()
	e.cluster.Net().Isolate(old.ID)
	t.Logf("isolated the leader %s", old.ID)
	t.Cleanup(e.cluster.Net().Heal)

	waitUntil(t, 60*time.Second, "the isolated leader to stop being ready", func() bool { return !old.Ready() })
	// Read once it is cut off: an entry the followers acknowledged just
	// before the cut may still commit on it; none may after.
	oldCommit := raftState(t, e.cluster, old).CommitIndex
	var leader *harness.Node
	waitUntil(t, 60*time.Second, "another node to lead", func() bool {
		for _, n := range e.cluster.Nodes {
			if n != old && n.Ready() {
				leader = n
				return true
			}
		}
		return false
	})
	during := e.serveOne("during the partition")
	if s := raftState(t, e.cluster, old); s.State == "leader" || s.CommitIndex > oldCommit {
		t.Fatalf("the isolated node is %s with commit index %d (%d when cut): it must neither lead nor commit", s.State, s.CommitIndex, oldCommit)
	}
	if old.Ready() {
		t.Fatalf("the isolated node %s answers ready while %s leads", old.ID, leader.ID)
	}

	e.cluster.Net().Heal()
	waitConverged(t, e.cluster, 60*time.Second)
	if s := raftState(t, e.cluster, old); s.State != "follower" {
		t.Fatalf("healed, the old leader %s is %s; want follower", old.ID, s.State)
	}
	for _, id := range []string{before, during} {
		e.waitStatus(id, sIdle, 30*time.Second)
	}
	e.serveOne("after the heal")
	waitConverged(t, e.cluster, 60*time.Second)
	t.Logf("new leader %s; the old leader %s rejoined as a follower at the same applied index", leader.ID, old.ID)
}

// followerOf returns a node other than leader.
func followerOf(c *harness.Cluster, leader *harness.Node) *harness.Node {
	for _, n := range c.Nodes {
		if n != leader {
			return n
		}
	}
	return nil
}

// One-way cuts between a follower and the leader do not stop the cluster.
// Cut(follower, leader) drops only what the follower sends on its own
// connections (nothing while it follows). Cut(leader, follower) starves
// the follower of heartbeats: it asks for pre-votes, which the leader and
// the other follower refuse while they hear a leader, so the leader keeps
// its term and the cluster keeps serving. Healed, the follower catches up.
func TestPartition_OneWayCutsKeepTheLeader(t *testing.T) {
	e, _ := newNetEnv(t, "")
	e.startWorker("")
	leader := e.leader()
	term := raftState(t, e.cluster, leader).Term
	f := followerOf(e.cluster, leader)
	net := e.cluster.Net()
	t.Cleanup(net.Heal)

	net.Cut(f.ID, leader.ID)
	e.serveOne("follower to leader cut")
	net.Heal()
	net.Cut(leader.ID, f.ID)
	t.Logf("cut %s→%s, then %s→%s", f.ID, leader.ID, leader.ID, f.ID)
	waitUntil(t, 60*time.Second, f.ID+" to campaign without heartbeats", func() bool { return raftState(t, e.cluster, f).State == "candidate" })
	for i := range 3 {
		e.serveOne(fmt.Sprintf("leader to follower cut %d", i))
	}
	if s := raftState(t, e.cluster, leader); s.State != "leader" || s.Term != term {
		t.Fatalf("under one-way cuts the leader %s is %s in term %d (was leader in term %d)", leader.ID, s.State, s.Term, term)
	}
	net.Heal()
	waitConverged(t, e.cluster, 60*time.Second)
}

// Latency on the links between the leader and one follower (both ways)
// slows that follower, not the cluster: sessions are served, and with the
// latency removed every node converges.
func TestPartition_LatencyOnOneLinkKeepsServing(t *testing.T) {
	e, _ := newNetEnv(t, "")
	e.startWorker("")
	leader := e.leader()
	f := followerOf(e.cluster, leader)
	net := e.cluster.Net()
	net.Latency(leader.ID, f.ID, 200*time.Millisecond)
	net.Latency(f.ID, leader.ID, 200*time.Millisecond)
	for i := range 3 {
		e.serveOne(fmt.Sprintf("slow link %d", i))
	}
	net.Latency(leader.ID, f.ID, 0)
	net.Latency(f.ID, leader.ID, 0)
	waitConverged(t, e.cluster, 60*time.Second)
}
