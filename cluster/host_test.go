package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// thost is one in-process member holding every partition.
type thost struct {
	id, raftAddr, grpcAddr, dir string
	host                        *cluster.Host
}

func hostConfig(h *thost, peers []cluster.Peer, partitions int) cluster.Config {
	return cluster.Config{
		ID: h.id, DataDir: h.dir, RaftAddr: h.raftAddr, GRPCAddr: h.grpcAddr, Peers: peers, Partitions: partitions,
		HeartbeatTimeout: 800 * time.Millisecond, ElectionTimeout: 800 * time.Millisecond,
		StepDownTimeout: 400 * time.Millisecond, CommitTimeout: 10 * time.Millisecond,
		RegisterInterval: 200 * time.Millisecond, BalanceInterval: 200 * time.Millisecond,
	}
}

func startHost(t *testing.T, h *thost, peers []cluster.Peer, partitions int) {
	t.Helper()
	host, err := cluster.NewHost(hostConfig(h, peers, partitions))
	if err != nil {
		t.Fatalf("open %s: %v", h.id, err)
	}
	if err := host.Start(func(int) cluster.Hooks { return cluster.Hooks{} }); err != nil {
		t.Fatalf("start %s: %v", h.id, err)
	}
	h.host = host
}

// startHosts starts n in-process members of a cluster of the given
// number of partitions, shut down at the end of the test. withGRPC gives
// each a gRPC address (nothing serves it): the nodes table then names it,
// and a node that asks another there hears nothing.
func startHosts(t *testing.T, n, partitions int, withGRPC bool) ([]*thost, []cluster.Peer) {
	t.Helper()
	var hosts []*thost
	var peers []cluster.Peer
	for i := 1; i <= n; i++ {
		h := &thost{id: fmt.Sprintf("n%d", i), raftAddr: freeAddr(t), dir: t.TempDir()}
		if withGRPC {
			h.grpcAddr = freeAddr(t)
		}
		hosts = append(hosts, h)
		peers = append(peers, cluster.Peer{ID: h.id, RaftAddr: h.raftAddr})
	}
	t.Cleanup(func() {
		for _, h := range hosts {
			if h.host != nil {
				h.host.Shutdown()
			}
		}
	})
	for _, h := range hosts {
		startHost(t, h, peers, partitions)
	}
	return hosts, peers
}

// partitionLeader waits for the one ready node of partition k.
func partitionLeader(t *testing.T, hosts []*thost, k int) *cluster.Node {
	t.Helper()
	var leader *cluster.Node
	waitFor(t, 15*time.Second, fmt.Sprintf("a ready leader of partition %d", k), func() bool {
		leader = nil
		for _, h := range hosts {
			if ok, _ := h.host.Partition(k).Ready(); ok {
				if leader != nil {
					return false
				}
				leader = h.host.Partition(k)
			}
		}
		return leader != nil
	})
	return leader
}

// createIn creates sessions in partition k through its leader, found
// again when the balancer moved the leadership meanwhile.
func createIn(t *testing.T, hosts []*thost, k int, ids ...string) {
	t.Helper()
	for _, id := range ids {
		waitFor(t, 15*time.Second, "creating "+id, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := partitionLeader(t, hosts, k).Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_CreateSession{
				CreateSession: &fsmpb.CreateSession{SessionId: id, MessageId: "m1", Message: "hello"},
			}})
			if err == nil && res.Err != nil {
				t.Fatalf("create %s: %v", id, res.Err)
			}
			return err == nil
		})
	}
}

// sessionsOf lists the sessions partition k of a host holds.
func sessionsOf(h *thost, k int) string {
	var ids []string
	for _, s := range h.host.Partition(k).State().Sessions() {
		ids = append(ids, s.Id)
	}
	return strings.Join(ids, ",")
}

// Two partitions on three nodes are two raft groups over one raft listener
// per node: each elects its own leader, replicates only its own commands,
// keeps its stores in its own directory, and comes back after a restart.
func TestHostRunsEachPartitionAsItsOwnRaftGroup(t *testing.T) {
	hosts, peers := startHosts(t, 3, 2, true)
	createIn(t, hosts, 0, "a1", "a2")
	createIn(t, hosts, 1, "b1")
	for _, h := range hosts {
		waitFor(t, 15*time.Second, h.id+" applying both partitions", func() bool {
			return sessionsOf(h, 0) == "a1,a2" && sessionsOf(h, 1) == "b1"
		})
	}

	// Every partition names its leader's gRPC address from the nodes
	// table, which only partition 0 holds: partition 1's leadership moves
	// to a node that does not lead partition 0, whose addresses partition
	// 0 records as a follower's registration does.
	lead0 := partitionLeader(t, hosts, 0)
	var other *thost
	for _, o := range hosts {
		if o.id != lead0.ID() {
			other = o
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l := partitionLeader(t, hosts, 1); l.ID() != other.id {
		if _, err := l.TransferLeadership(ctx, other.id); err != nil {
			t.Fatalf("move partition 1's leadership to %s: %v", other.id, err)
		}
	}
	res, err := lead0.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: &fsmpb.NodeInfo{
		Id: other.id, RaftAddress: other.raftAddr, GrpcAddress: other.grpcAddr,
	}}}})
	if err != nil || res.Err != nil {
		t.Fatalf("record %s's addresses: %v %v", other.id, err, res)
	}
	for _, h := range hosts {
		waitFor(t, 15*time.Second, h.id+" knowing partition 1's leader's gRPC address", func() bool {
			l := h.host.Partition(1).Leader()
			return l != nil && l.Id == other.id && l.GrpcAddress == other.grpcAddr
		})
		if n := len(h.host.Partition(1).State().Nodes()); n != 0 {
			t.Errorf("%s: partition 1 holds %d node rows; the nodes table is partition 0's", h.id, n)
		}
	}

	h := hosts[2]
	for _, f := range []string{"raft/raft.db", "raft/p1/raft.db", "raft/p1/wal"} {
		if _, err := os.Stat(filepath.Join(h.dir, f)); err != nil {
			t.Errorf("partition stores: %v", err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(h.dir, "node.json"))
	var ident cluster.Identity
	if err != nil || json.Unmarshal(raw, &ident) != nil || ident.Partitions != 2 {
		t.Fatalf("node.json %s (%v): want partitions 2", raw, err)
	}

	// A restart brings both partitions back from their own stores, and
	// each takes the other nodes' new writes.
	if err := h.host.Shutdown(); err != nil {
		t.Fatal(err)
	}
	h.host = nil
	createIn(t, hosts[:2], 1, "b2")
	startHost(t, h, peers, 2)
	waitFor(t, 15*time.Second, "the restarted node's partitions", func() bool {
		return sessionsOf(h, 0) == "a1,a2" && sessionsOf(h, 1) == "b1,b2"
	})
}

// The number of partitions is fixed when a cluster is bootstrapped: a data
// dir of one number refuses to open with another, a cluster of one
// included.
func TestHostRefusesADataDirOfAnotherPartitionCount(t *testing.T) {
	h := &thost{id: "n1", raftAddr: freeAddr(t), dir: t.TempDir()}
	peers := []cluster.Peer{{ID: "n1", RaftAddr: h.raftAddr}}
	startHost(t, h, peers, 2)
	if err := h.host.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.NewHost(hostConfig(h, peers, 3)); err == nil || !strings.Contains(err.Error(), "belongs to a cluster of 2 partitions, not 3") {
		t.Fatalf("open 2 partitions as 3: %v", err)
	}
	if _, err := cluster.Open(hostConfig(h, peers, 0), cluster.Hooks{}); err == nil || !strings.Contains(err.Error(), "belongs to a cluster of 2 partitions, not 1") {
		t.Fatalf("open 2 partitions as a cluster of one: %v", err)
	}
	// Nothing the refusals opened holds the port or the stores.
	startHost(t, h, peers, 2)
	h.host.Shutdown()
}

// leadsOf counts the partitions each host leads.
func leadsOf(hosts []*thost, partitions int) map[string]int {
	out := map[string]int{}
	for _, h := range hosts {
		if h.host == nil {
			continue
		}
		for k := range partitions {
			if h.host.Partition(k).IsLeader() {
				out[h.id]++
			}
		}
	}
	return out
}

// Three partitions on three nodes end with one leader on each: after
// start-up, and again after a node that led one stops and returns.
func TestHostSpreadsPartitionLeadersOverTheNodes(t *testing.T) {
	hosts, peers := startHosts(t, 3, 3, false)
	oneEach := func(what string) {
		waitFor(t, 30*time.Second, what, func() bool {
			l := leadsOf(hosts, 3)
			return l["n1"] == 1 && l["n2"] == 1 && l["n3"] == 1
		})
	}
	oneEach("one partition leader on each node after start-up")

	h := hosts[1]
	if err := h.host.Shutdown(); err != nil {
		t.Fatal(err)
	}
	h.host = nil
	waitFor(t, 30*time.Second, "the two other nodes leading all three partitions", func() bool {
		l := leadsOf(hosts, 3)
		return l["n1"]+l["n3"] == 3
	})
	startHost(t, h, peers, 3)
	oneEach("one partition leader on each node after n2 returned")
}
