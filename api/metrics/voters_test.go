package metrics

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// memNode is one raft node on in-memory stores and transport.
type memNode struct {
	id    string
	raft  *raft.Raft
	trans *raft.InmemTransport
	vh    *VoterHealth
}

// memCluster starts voters voting nodes, n1..nN, connected to each other,
// and waits for a leader.
func memCluster(t *testing.T, voters int) []*memNode {
	t.Helper()
	var nodes []*memNode
	var servers []raft.Server
	for i := 1; i <= voters; i++ {
		n := newMemNode(t, fmt.Sprintf("n%d", i))
		nodes = append(nodes, n)
		servers = append(servers, raft.Server{ID: raft.ServerID(n.id), Address: n.trans.LocalAddr()})
	}
	for _, a := range nodes {
		for _, b := range nodes {
			a.trans.Connect(b.trans.LocalAddr(), b.trans)
		}
	}
	if err := nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, nodes)
	return nodes
}

func newMemNode(t *testing.T, id string) *memNode {
	t.Helper()
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(id)
	cfg.HeartbeatTimeout = 100 * time.Millisecond
	cfg.ElectionTimeout = 100 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	_, trans := raft.NewInmemTransport(raft.ServerAddress(id))
	store := raft.NewInmemStore()
	r, err := raft.NewRaft(cfg, &raft.MockFSM{}, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown().Error() })
	return &memNode{id: id, raft: r, trans: trans, vh: NewVoterHealth(r, id)}
}

func leaderOf(t *testing.T, nodes []*memNode) *memNode {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.raft.State() == raft.Leader {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader elected in 10 s")
	return nil
}

// voterValues scrapes dex_raft_voter_healthy: voter -> value.
func voterValues(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			got[m.Label[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return got
}

// waitVoters waits until the leader's scrape shows want.
func waitVoters(t *testing.T, n *memNode, want map[string]float64) {
	t.Helper()
	var got map[string]float64
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got = voterValues(t, n.vh); fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("dex_raft_voter_healthy on %s = %v; want %v", n.id, got, want)
}

func TestVoterHealth_LeaderReportsTheVotersThatAnswerItsHeartbeats(t *testing.T) {
	nodes := memCluster(t, 3)
	leader := leaderOf(t, nodes)
	all := map[string]float64{"n1": 1, "n2": 1, "n3": 1}
	waitVoters(t, leader, all)
	for _, n := range nodes {
		if n != leader {
			if got := voterValues(t, n.vh); len(got) != 0 {
				t.Fatalf("follower %s reports %v; only the leader reports voters", n.id, got)
			}
		}
	}

	// Cut one follower off: the leader keeps its quorum and reports the
	// follower unhealthy, then healthy again once it answers.
	var cut *memNode
	for _, n := range nodes {
		if n != leader {
			cut = n
			break
		}
	}
	leader.trans.Disconnect(cut.trans.LocalAddr())
	cut.trans.DisconnectAll()
	down := map[string]float64{"n1": 1, "n2": 1, "n3": 1}
	down[cut.id] = 0
	waitVoters(t, leader, down)
	if leaderOf(t, nodes) != leader {
		t.Fatal("the leader changed while one follower of three was cut off")
	}
	leader.trans.Connect(cut.trans.LocalAddr(), cut.trans)
	cut.trans.Connect(leader.trans.LocalAddr(), leader.trans)
	waitVoters(t, leader, all)
}

func TestVoterHealth_NonvotersAreNotCounted(t *testing.T) {
	nodes := memCluster(t, 1)
	leader := nodes[0]
	waitVoters(t, leader, map[string]float64{"n1": 1})

	// A nonvoter that never answers: not a voter, so not reported.
	extra := newMemNode(t, "n2")
	if err := leader.raft.AddNonvoter("n2", extra.trans.LocalAddr(), 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // heartbeats to n2 fail meanwhile
	waitVoters(t, leader, map[string]float64{"n1": 1})
}

// A new term's heartbeats tell of a success only after failures of their
// own, so a failure seen in an earlier term must not outlive it; nor one of
// a peer removed from the configuration.
func TestVoterHealth_AFailureEndsWithItsTermOrItsPeer(t *testing.T) {
	nodes := memCluster(t, 3)
	leader := leaderOf(t, nodes)
	all := map[string]float64{"n1": 1, "n2": 1, "n3": 1}
	waitVoters(t, leader, all)
	var peer string
	for _, n := range nodes {
		if n != leader {
			peer = n.id
			break
		}
	}
	down := map[string]float64{"n1": 1, "n2": 1, "n3": 1}
	down[peer] = 0
	failed := raft.Observation{Data: raft.FailedHeartbeatObservation{PeerID: raft.ServerID(peer)}}

	leader.vh.observe(failed)
	waitVoters(t, leader, down)
	leader.vh.observe(raft.Observation{Data: raft.LeaderObservation{LeaderID: raft.ServerID(leader.id)}})
	waitVoters(t, leader, all)

	leader.vh.observe(failed)
	waitVoters(t, leader, down)
	leader.vh.observe(raft.Observation{Data: raft.PeerObservation{Removed: true, Peer: raft.Server{ID: raft.ServerID(peer)}}})
	waitVoters(t, leader, all)
}
