//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/cluster"
)

// nodeState asks one node for its own raft view.
func nodeState(t *testing.T, n *harness.Node) *dexv1.NodeStateResponse {
	t.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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

// recordedClusterID is the cluster id in a node's data dir ("" if none).
func recordedClusterID(n *harness.Node) string {
	raw, err := os.ReadFile(filepath.Join(n.DataDir, "node.json"))
	if err != nil {
		return ""
	}
	var ident struct {
		ClusterID string `json:"cluster_id"`
	}
	_ = json.Unmarshal(raw, &ident)
	return ident.ClusterID
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Cluster A runs with a session; n1 and n2 die and come back on empty data
// dirs with the same --peers while A's n3 still runs: they must not form a
// new cluster that A's n3 takes over. They refuse to bootstrap, in one line
// that says to use --join, every time.
func TestIdentity_AnOldNodeCannotTakeOverANewCluster(t *testing.T) {
	for run := 1; run <= 10; run++ {
		t.Run(fmt.Sprintf("run%d", run), func(t *testing.T) {
			e := newEnv(t)
			e.createSession("from cluster A")
			n1, n2, n3 := e.cluster.Nodes[0], e.cluster.Nodes[1], e.cluster.Nodes[2]
			waitUntil(t, 20*time.Second, "every node to record the cluster id", func() bool {
				a := recordedClusterID(n1)
				return a != "" && recordedClusterID(n2) == a && recordedClusterID(n3) == a
			})
			// Every member records its addresses in the state once it runs
			// (within a second of its start); that record is what tells a
			// wiped member from a founding one that never started.
			waitUntil(t, 20*time.Second, "every node to record its addresses", func() bool {
				st, err := dexv1.NewAdminServiceClient(e.conn).Status(e.ctx(5*time.Second), &dexv1.StatusRequest{})
				if err != nil {
					return false
				}
				n := 0
				for _, ns := range st.Nodes {
					if ns.GrpcAddress != "" {
						n++
					}
				}
				if n < 3 {
					return false
				}
				// …and n3, the survivor, has applied those records.
				return nodeState(t, n3).AppliedIndex >= st.CommitIndex
			})
			clusterA := recordedClusterID(n3)
			n1.Kill()
			n2.Kill()
			for _, n := range []*harness.Node{n1, n2} {
				if err := os.RemoveAll(n.DataDir); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(n.LogPath, 0); err != nil {
					t.Fatal(err)
				}
				if err := n.Start(); err != nil {
					t.Fatal(err)
				}
			}
			// (n3 keeps A's ports: a new n3 could not even listen.)
			for _, n := range []*harness.Node{n1, n2} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := n.Wait(ctx)
				cancel()
				if err == nil || n.Running() {
					t.Fatalf("%s started on an empty data dir next to cluster A's n3 (err %v); log:\n%s", n.ID, err, harness.Tail(n.Log(), 10))
				}
				last := lastLine(n.Log())
				if !strings.Contains(last, "already runs at these --peers") || !strings.Contains(last, "--join") || !strings.Contains(last, clusterA) {
					t.Fatalf("%s's last line %q: want the one-line refusal naming cluster %s and --join", n.ID, last, clusterA)
				}
			}
			// A's n3 still holds A's session and its own id; nothing new was served.
			if got := recordedClusterID(n3); got != clusterA {
				t.Fatalf("n3's cluster id changed from %s to %s", clusterA, got)
			}
			if st := nodeState(t, n3); st.ClusterId != clusterA {
				t.Fatalf("n3 reports cluster %q, want %s", st.ClusterId, clusterA)
			}
		})
		if t.Failed() {
			return
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// Three Join calls naming dead addresses used to add three voters and wedge
// the cluster. Now each is refused, the cluster keeps serving, a removal
// that would leave no reachable majority is refused, and a real node that
// joins comes in as a non-voter and is promoted once caught up.
func TestIdentity_DeadJoinsLeaveTheClusterServing(t *testing.T) {
	e := newEnv(t)
	e.startWorker("")
	leader := e.leader()
	admin := dexv1.NewAdminServiceClient(e.conn)
	dead, err := harness.FreeAddrs(6)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_, err := admin.Join(e.ctx(10*time.Second), &dexv1.JoinRequest{Node: &dexv1.NodeInfo{
			Id: fmt.Sprintf("ghost%d", i), RaftAddress: dead[2*i], GrpcAddress: dead[2*i+1],
		}})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "does not answer") {
			t.Fatalf("join of dead ghost%d: %v; want FailedPrecondition saying it does not answer", i, err)
		}
	}
	st, err := admin.Status(e.ctx(10*time.Second), &dexv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 {
		t.Fatalf("after three dead joins the cluster has %d members, want 3", len(st.Nodes))
	}
	id := e.createSession("still serving")
	e.waitStatus(id, sIdle, 30*time.Second)
	// The reachability checks ask members at their recorded gRPC addresses.
	waitUntil(t, 20*time.Second, "every member's addresses in the state", func() bool {
		st, err := admin.Status(e.ctx(10*time.Second), &dexv1.StatusRequest{})
		if err != nil {
			return false
		}
		for _, ns := range st.Nodes {
			if ns.GrpcAddress == "" {
				return false
			}
		}
		return true
	})

	// One follower down: removing the other live follower would leave the
	// leader and a dead node, 1 of 2.
	var live, down *harness.Node
	for _, n := range e.cluster.Nodes {
		if n.ID == leader.ID {
			continue
		}
		if down == nil {
			down = n
		} else {
			live = n
		}
	}
	down.Kill()
	msg := e.dexctlFails("node", "remove", "--yes", live.ID)
	if !strings.Contains(msg, "not a majority") || !strings.Contains(msg, "--force") {
		t.Fatalf("removing %s with %s down: %q; want the refusal naming --force", live.ID, down.ID, msg)
	}
	e.dexctl(nil, "node", "remove", down.ID)

	// A real node joins as a non-voter and is promoted once caught up.
	addrs, err := harness.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	n4 := &harness.Node{ID: "n4", RaftAddr: addrs[0], GRPCAddr: addrs[1], HTTPAddr: addrs[2], DataDir: filepath.Join(e.dir, "n4")}
	n4.Name, n4.Bin, n4.LogPath = "dexd n4", filepath.Join(binDir, "dexd"), filepath.Join(e.dir, "n4.log")
	n4.Args = append([]string{"--id", "n4", "--data-dir", n4.DataDir, "--raft-addr", n4.RaftAddr, "--grpc-addr", n4.GRPCAddr,
		"--http-addr", n4.HTTPAddr, "--join", leader.GRPCAddr}, fastArgs...)
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n4.Kill)
	waitUntil(t, 30*time.Second, "n4 to be promoted to voter", func() bool {
		st, err := admin.Status(e.ctx(10*time.Second), &dexv1.StatusRequest{})
		if err != nil {
			return false
		}
		for _, ns := range st.Nodes {
			if ns.Id == "n4" && ns.Suffrage == "voter" {
				return true
			}
		}
		return false
	})
	if got, want := recordedClusterID(n4), recordedClusterID(leader); got == "" || got != want {
		t.Fatalf("n4 records cluster %q, the leader %q", got, want)
	}
	id = e.createSession("after the join")
	e.waitStatus(id, sIdle, 30*time.Second)
}

// A RequestVote with LeadershipTransfer set and term+100 from a process that
// is not a voter (and, next, from one claiming a voter's id) used to be
// granted and move the term. Now the leader's term does not move.
func TestIdentity_AForgedVoteDoesNotMoveTheTerm(t *testing.T) {
	e := newEnv(t)
	leader := e.leader()
	before := nodeState(t, leader)
	if before.ClusterId == "" {
		waitUntil(t, 10*time.Second, "the cluster id", func() bool { return nodeState(t, leader).ClusterId != "" })
		before = nodeState(t, leader)
	}
	var voter *harness.Node
	for _, n := range e.cluster.Nodes {
		if n.ID != leader.ID {
			voter = n
		}
	}
	// A peer that passes the handshake: the membership rules must hold even
	// for an authenticated peer.
	trans, err := cluster.NewPeerTransport(before.ClusterId)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	for _, who := range []struct{ id, addr string }{
		{"intruder", string(trans.LocalAddr())},
		{voter.ID, voter.RaftAddr},
	} {
		var resp raft.RequestVoteResponse
		req := &raft.RequestVoteRequest{
			RPCHeader:          raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(who.id), Addr: []byte(who.addr)},
			Term:               before.Term + 100,
			LastLogIndex:       before.CommitIndex + 1000,
			LastLogTerm:        before.Term + 99,
			LeadershipTransfer: true,
		}
		if err := trans.RequestVote(raft.ServerID(leader.ID), raft.ServerAddress(leader.RaftAddr), req, &resp); err != nil {
			t.Fatalf("forged vote as %s: %v", who.id, err)
		}
		if resp.Granted || resp.Term != before.Term {
			t.Fatalf("forged vote as %s: granted %v at term %d; want refused at term %d", who.id, resp.Granted, resp.Term, before.Term)
		}
	}
	// The same forgery without the handshake does not even reach raft.
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var resp raft.RequestVoteResponse
	err = plain.RequestVote(raft.ServerID(leader.ID), raft.ServerAddress(leader.RaftAddr), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("intruder")}, Term: before.Term + 100, LeadershipTransfer: true}, &resp)
	if err == nil && resp.Granted {
		t.Fatal("a vote without the handshake was granted")
	}
	for _, n := range e.cluster.Nodes {
		if st := nodeState(t, n); st.Term != before.Term {
			t.Fatalf("%s is at term %d after the forged votes, was %d", n.ID, st.Term, before.Term)
		}
	}
	if now := e.leader(); now.ID != leader.ID {
		t.Fatalf("leadership moved from %s to %s", leader.ID, now.ID)
	}
	e.createSession("after the forgery")
	metrics, err := harness.HTTPClient.Get("http://" + leader.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer metrics.Body.Close()
	raw, err := io.ReadAll(metrics.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "dex_raft_refused_votes_total 2") {
		t.Fatalf("the leader's metrics do not count 2 refused votes:\n%s", grepLines(string(raw), "dex_raft_"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A founding member started after the other two formed the cluster (the
// README's nodes started by hand, one after another) is named by the
// cluster's configuration and never held its data: its peers welcome it, so
// it takes the log from the leader instead of bootstrapping, and it is not
// refused as a second history.
func TestIdentity_AFoundingMemberStartedLateTakesTheLog(t *testing.T) {
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: binDir, Dir: t.TempDir(), Args: fastArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	for _, n := range []*harness.Node{n1, n2} {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(c.Target())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := client.New(conn).CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "before-n3"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "n1 and n2 to record the cluster id", func() bool {
		return recordedClusterID(n1) != "" && recordedClusterID(n2) == recordedClusterID(n1)
	})
	id := recordedClusterID(n1)
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "n3 to follow with the cluster's log and id", func() bool {
		if !n3.Running() {
			t.Fatalf("n3 exited: %s", lastLine(n3.Log()))
		}
		conn, err := grpc.NewClient(n3.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return false
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer ccancel()
		st, err := dexv1.NewAdminServiceClient(conn).NodeState(cctx, &dexv1.NodeStateRequest{})
		return err == nil && st.State == "follower" && st.ClusterId == id && st.AppliedIndex > 0 && recordedClusterID(n3) == id
	})
	if !strings.Contains(n3.Log(), "taking the log from the leader instead of bootstrapping") {
		t.Fatalf("n3 did not say why it did not bootstrap; log:\n%s", harness.Tail(n3.Log(), 10))
	}
	// n3 is a voter of the same cluster: with the leader gone, n3 and the
	// other one elect a leader that still holds the session.
	leader, err := c.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	next, err := c.WaitReady(rctx)
	if err != nil {
		t.Fatal(err)
	}
	ncon, err := grpc.NewClient(next.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer ncon.Close()
	if _, err := dexv1.NewSessionServiceClient(ncon).GetSession(rctx, &dexv1.GetSessionRequest{SessionId: "before-n3"}); err != nil {
		t.Fatalf("the new leader %s: %v", next.ID, err)
	}
}
