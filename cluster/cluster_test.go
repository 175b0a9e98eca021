package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// tnode is one in-process cluster member: a raft node and its gRPC server.
type tnode struct {
	id, raftAddr, grpcAddr, dir string
	join                        string
	node                        *cluster.Node
	srv                         *server.Server

	mu     sync.Mutex
	halted error
}

func (n *tnode) haltErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.halted
}

type tcluster struct {
	t     testing.TB
	nodes []*tnode
	peers []cluster.Peer
	log   *zap.Logger
	// services, when set, gives each node its leader services.
	services func(id string) []cluster.LeaderService
}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func newCluster(t testing.TB, size int) *tcluster {
	c := &tcluster{t: t, log: zap.NewNop()}
	if os.Getenv("DEX_TEST_LOG") != "" {
		c.log, _ = zap.NewDevelopment()
	}
	for i := 1; i <= size; i++ {
		n := &tnode{
			id:       fmt.Sprintf("n%d", i),
			raftAddr: freeAddr(t),
			grpcAddr: freeAddr(t),
			dir:      t.TempDir(),
		}
		c.nodes = append(c.nodes, n)
		c.peers = append(c.peers, cluster.Peer{ID: n.id, RaftAddr: n.raftAddr})
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	return c
}

func (c *tcluster) start(i int) {
	c.t.Helper()
	n := c.nodes[i]
	var services []cluster.LeaderService
	if c.services != nil {
		services = c.services(n.id)
	}
	node, err := cluster.Open(cluster.Config{
		ID:               n.id,
		DataDir:          n.dir,
		RaftAddr:         n.raftAddr,
		GRPCAddr:         n.grpcAddr,
		Peers:            c.peers,
		Join:             n.join,
		Logger:           c.log.With(zap.String("node", n.id)),
		HeartbeatTimeout: 800 * time.Millisecond, // loose enough that a loaded CI machine does not flap
		ElectionTimeout:  800 * time.Millisecond,
		StepDownTimeout:  400 * time.Millisecond,
		CommitTimeout:    10 * time.Millisecond,
		RegisterInterval: 200 * time.Millisecond,
		OnHalt: func(err error) {
			n.mu.Lock()
			n.halted = err
			n.mu.Unlock()
		},
	}, cluster.Hooks{LeaderServices: services})
	if err != nil {
		c.t.Fatalf("open %s: %v", n.id, err)
	}
	lis, err := net.Listen("tcp", n.grpcAddr)
	if err != nil {
		node.Shutdown()
		c.t.Fatalf("listen %s: %v", n.grpcAddr, err)
	}
	n.node = node
	n.srv = server.New(node, c.log)
	go n.srv.Serve(lis)
	if node.NeedsJoin() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := node.Join(ctx, n.join); err != nil {
			c.t.Fatalf("join %s: %v", n.id, err)
		}
	}
}

func (c *tcluster) stop(i int) {
	n := c.nodes[i]
	if n.node == nil {
		return
	}
	n.srv.Stop(2 * time.Second)
	if err := n.node.Shutdown(); err != nil {
		c.t.Logf("shutdown %s: %v", n.id, err)
	}
	n.node, n.srv = nil, nil
}

func (c *tcluster) running() []*tnode {
	var out []*tnode
	for _, n := range c.nodes {
		if n.node != nil {
			out = append(out, n)
		}
	}
	return out
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readyLeader waits for exactly one running node to be ready.
func (c *tcluster) readyLeader() *tnode {
	c.t.Helper()
	var leader *tnode
	waitFor(c.t, 15*time.Second, "a ready leader", func() bool {
		leader = nil
		for _, n := range c.running() {
			if ok, _ := n.node.Ready(); ok {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		return leader != nil
	})
	return leader
}

func snapshotBytes(t testing.TB, f *fsm.FSM) []byte {
	t.Helper()
	s := f.Snapshot()
	defer s.Release()
	var b bytes.Buffer
	if err := s.Persist(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// converged waits until every running node applied the leader's commit index
// and all of them persist byte-identical state.
func (c *tcluster) converged(leader *tnode) {
	c.t.Helper()
	waitFor(c.t, 15*time.Second, "identical state on every node", func() bool {
		commit := leader.node.Raft().CommitIndex()
		var first []byte
		for _, n := range c.running() {
			if n.node.Raft().AppliedIndex() < commit {
				return false
			}
		}
		for _, n := range c.running() {
			b := snapshotBytes(c.t, n.node.FSM())
			if first == nil {
				first = b
			} else if !bytes.Equal(first, b) {
				return false
			}
		}
		return true
	})
}

func createSessions(t *testing.T, leader *tnode, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := leader.node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_CreateSession{
			CreateSession: &fsmpb.CreateSession{SessionId: fmt.Sprintf("s%03d", i), MessageId: "m1", Message: "hello"},
		}})
		cancel()
		if err != nil {
			t.Fatalf("propose s%03d: %v", i, err)
		}
		if res.Err != nil {
			t.Fatalf("s%03d rejected: %v", i, res.Err)
		}
	}
}

func sessionCount(n *tnode) int { return len(n.node.State().Sessions()) }

func TestClusterReplicatesTakesOverAndRestarts(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	if leader.node.Epoch() == 0 {
		t.Fatal("the ready leader has no dispatch epoch")
	}
	createSessions(t, leader, 0, 10)
	c.converged(leader)
	for _, n := range c.running() {
		if got := sessionCount(n); got != 10 {
			t.Fatalf("%s has %d sessions, want 10", n.id, got)
		}
	}

	// A follower refuses writes and names the leader.
	for _, n := range c.running() {
		if n == leader {
			continue
		}
		_, err := n.node.Propose(context.Background(), &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "x"}}})
		var nl *cluster.NotLeaderError
		if !errors.As(err, &nl) || nl.LeaderID != leader.id {
			t.Fatalf("propose on follower %s: got %v, want a NotLeaderError naming %s", n.id, err, leader.id)
		}
		if ok, reason := n.node.Ready(); ok || !strings.Contains(reason, "not the leader") {
			t.Fatalf("follower %s ready=%v reason %q", n.id, ok, reason)
		}
		break
	}

	// Takeover: the leader goes away, another is elected and accepts writes.
	oldEpoch := leader.node.Epoch()
	old := leader
	c.stop(indexOf(c, old))
	leader = c.readyLeader()
	if leader == old {
		t.Fatal("the stopped node is still the leader")
	}
	if leader.node.Epoch() <= oldEpoch {
		t.Fatalf("new leader epoch %d, want > %d", leader.node.Epoch(), oldEpoch)
	}
	createSessions(t, leader, 10, 15)

	// The old node restarts on its data dir and catches up.
	c.start(indexOf(c, old))
	c.converged(leader)
	for _, n := range c.running() {
		if got := sessionCount(n); got != 15 {
			t.Fatalf("%s has %d sessions, want 15", n.id, got)
		}
	}

	// Status from a follower: three voters, one leader, addresses known.
	waitFor(t, 10*time.Second, "every node's addresses in the state", func() bool {
		return len(leader.node.State().Nodes()) == 3
	})
	checkStatus(t, c, leader)

	// Full restart on the same data dirs.
	var commitBefore uint64
	for _, n := range c.running() {
		commitBefore = max(commitBefore, n.node.Raft().CommitIndex())
	}
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	leader = c.readyLeader()
	c.converged(leader)
	for _, n := range c.running() {
		if got := sessionCount(n); got != 15 {
			t.Fatalf("after restart %s has %d sessions, want 15", n.id, got)
		}
		if ci := n.node.Raft().CommitIndex(); ci < commitBefore {
			t.Fatalf("after restart %s commit index %d < %d before", n.id, ci, commitBefore)
		}
	}
}

func indexOf(c *tcluster, n *tnode) int {
	for i, m := range c.nodes {
		if m == n {
			return i
		}
	}
	panic("no such node")
}

func dial(t *testing.T, addr string) dexv1.AdminServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return dexv1.NewAdminServiceClient(conn)
}

func checkStatus(t *testing.T, c *tcluster, leader *tnode) {
	t.Helper()
	var follower *tnode
	for _, n := range c.running() {
		if n != leader {
			follower = n
		}
	}
	cli := dial(t, follower.grpcAddr)
	var resp *dexv1.StatusResponse
	waitFor(t, 10*time.Second, "a full status", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r, err := cli.Status(ctx, &dexv1.StatusRequest{})
		if err != nil {
			return false
		}
		resp = r
		leaders := 0
		for _, n := range r.Nodes {
			if n.Suffrage != "voter" || n.GrpcAddress == "" || n.State == "unreachable" {
				return false
			}
			if n.State == "leader" {
				leaders++
			}
		}
		return len(r.Nodes) == 3 && leaders == 1 && r.Leader == leader.id
	})
	if resp.AnsweredBy != follower.id {
		t.Fatalf("answered by %s, want %s", resp.AnsweredBy, follower.id)
	}

	// Membership changes on a follower: Unavailable, leader named, trailer set.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var trailer metadata.MD
	_, err := cli.RemoveNode(ctx, &dexv1.RemoveNodeRequest{NodeId: leader.id}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), leader.id) {
		t.Fatalf("RemoveNode on a follower: %v", err)
	}
	if got := trailer.Get(cluster.LeaderMetadataKey); len(got) != 1 || got[0] != leader.grpcAddr {
		t.Fatalf("dex-leader trailer %v, want %s", got, leader.grpcAddr)
	}
	// Validation on the leader.
	lc := dial(t, leader.grpcAddr)
	if _, err := lc.RemoveNode(ctx, &dexv1.RemoveNodeRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("RemoveNode without id: %v", err)
	}
	if _, err := lc.RemoveNode(ctx, &dexv1.RemoveNodeRequest{NodeId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("RemoveNode of an unknown node: %v", err)
	}
	if _, err := lc.Join(ctx, &dexv1.JoinRequest{Node: &dexv1.NodeInfo{Id: "n9", RaftAddress: "bad"}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Join with a bad address: %v", err)
	}

	// Health: dex.v1.Dispatch serves only on the ready leader.
	for _, n := range c.running() {
		want := healthpb.HealthCheckResponse_NOT_SERVING
		if n == leader {
			want = healthpb.HealthCheckResponse_SERVING
		}
		conn, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		hc := healthpb.NewHealthClient(conn)
		waitFor(t, 5*time.Second, n.id+" dispatch health "+want.String(), func() bool {
			r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: server.DispatchService})
			return err == nil && r.Status == want
		})
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%s process health: %v %v", n.id, r, err)
		}
		conn.Close()
	}
}

func TestJoinThroughFollower(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	createSessions(t, leader, 0, 3)
	var follower *tnode
	for _, n := range c.running() {
		if n != leader {
			follower = n
		}
	}
	waitFor(t, 10*time.Second, "the leader's addresses in the state", func() bool {
		l := follower.node.Leader()
		return l != nil && l.GrpcAddress != ""
	})
	n4 := &tnode{id: "n4", raftAddr: freeAddr(t), grpcAddr: freeAddr(t), dir: t.TempDir(), join: follower.grpcAddr}
	c.nodes = append(c.nodes, n4)
	c.start(3)
	c.converged(leader)
	if got := sessionCount(n4); got != 3 {
		t.Fatalf("joined node has %d sessions, want 3", got)
	}
	if !leader.node.IsMember("n4") {
		t.Fatal("n4 is not in the configuration")
	}
	waitFor(t, 10*time.Second, "n4's addresses in the state", func() bool {
		for _, ni := range n4.node.State().Nodes() {
			if ni.Id == "n4" && ni.GrpcAddress == n4.grpcAddr {
				return true
			}
		}
		return false
	})
}

func TestUnknownCommandHaltsNode(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	createSessions(t, leader, 0, 2)

	apply := func(cmd *fsmpb.Command) (uint64, *fsm.Result) {
		t.Helper()
		data, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		f := leader.node.Raft().Apply(data, 5*time.Second)
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		res, _ := f.Response().(*fsm.Result)
		return f.Index(), res
	}

	// An unknown type marked ignorable is skipped everywhere.
	_, res := apply(&fsmpb.Command{Ignorable: true, NowMs: 1})
	if res == nil || !res.Ignored || res.Err != nil {
		t.Fatalf("ignorable entry: %+v", res)
	}
	c.converged(leader)
	for _, n := range c.running() {
		if err := n.haltErr(); err != nil {
			t.Fatalf("%s halted on an ignorable entry: %v", n.id, err)
		}
	}
	createSessions(t, leader, 2, 3)

	// An unknown type not marked ignorable stops every node at that index.
	index, _ := apply(&fsmpb.Command{NowMs: 1})
	want := fmt.Sprintf("log entry %d ", index)
	waitFor(t, 10*time.Second, "every node to halt", func() bool {
		for _, n := range c.running() {
			if n.haltErr() == nil {
				return false
			}
		}
		return true
	})
	for _, n := range c.running() {
		if err := n.haltErr(); !strings.Contains(err.Error(), want) {
			t.Fatalf("%s halted with %q, want it to name %q", n.id, err, want)
		}
		if ok, reason := n.node.Ready(); ok || !strings.Contains(reason, "halted") {
			t.Fatalf("%s ready=%v reason %q after halting", n.id, ok, reason)
		}
	}
	// Nothing after the bad entry is applied.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if res, err := leader.node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "late"}}}); err == nil && res.Err == nil {
		t.Fatal("a halted node applied a later command")
	}
	for _, n := range c.running() {
		if got := sessionCount(n); got != 3 {
			t.Fatalf("%s has %d sessions after the halt, want 3", n.id, got)
		}
	}
}

func TestDataDirIdentity(t *testing.T) {
	dir := t.TempDir()
	raftAddr := freeAddr(t)
	cfg := cluster.Config{ID: "n1", DataDir: dir, RaftAddr: raftAddr, Peers: []cluster.Peer{{ID: "n1", RaftAddr: raftAddr}}}
	n, err := cluster.Open(cfg, cluster.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	// A second node on the same dir fails on the store lock.
	cfg2 := cfg
	cfg2.RaftAddr = freeAddr(t)
	cfg2.Peers = []cluster.Peer{{ID: "n1", RaftAddr: cfg2.RaftAddr}}
	if _, err := cluster.Open(cfg2, cluster.Hooks{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open of a locked dir: %v", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cfg3 := cfg
	cfg3.ID = "n2"
	if _, err := cluster.Open(cfg3, cluster.Hooks{}); err == nil || err.Error() != fmt.Sprintf("data dir %s belongs to node n1, not n2", dir) {
		t.Fatalf("foreign dir: %v", err)
	}
	other := t.TempDir()
	os.WriteFile(other+"/notes.txt", []byte("x"), 0o600)
	cfg4 := cfg
	cfg4.DataDir = other
	if _, err := cluster.Open(cfg4, cluster.Hooks{}); err == nil || !strings.Contains(err.Error(), "is not a Dex data dir") {
		t.Fatalf("non-Dex dir: %v", err)
	}
	// Single node restarts on its dir, --peers ignored.
	cfg5 := cfg
	cfg5.Peers = nil
	n, err = cluster.Open(cfg5, cluster.Hooks{})
	if err != nil {
		t.Fatalf("restart without peers: %v", err)
	}
	n.Shutdown()

	// Damaged pages in raft.db: an error at start, not a crash.
	f, err := os.OpenFile(dir+"/raft/raft.db", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{0xA5}, 4*4096), 2*4096)
	f.Close()
	if _, err := cluster.Open(cfg5, cluster.Hooks{}); err == nil || !strings.Contains(err.Error(), "raft.db is damaged") {
		t.Fatalf("damaged raft.db: %v", err)
	}
}
