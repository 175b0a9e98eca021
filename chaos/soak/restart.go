package soak

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/cluster"
)

// The restart after the soak: every node, stopped once the states were
// compared, first has every snapshot it keeps restored offline (a node
// falls back to an older snapshot when its newest does not restore, so
// coming back is not enough), those it set aside and those it would not
// keep (its log says so) counted against it, then all start again on
// their own data dirs and must come back, catch up to the index they
// stopped at, and serve the sessions the soak ended with.

// restartWait bounds the wait for the restarted nodes to catch up.
const restartWait = 2 * time.Minute

// NodeRestart is one node's restart on its data dir after the soak.
type NodeRestart struct {
	Node      string                    `json:"node"`
	Snapshots []cluster.SnapshotRestore `json:"snapshots"`
	// NotKept: snapshots the node took and cancelled because they did not
	// read back (its log's lines); NotKeptLine the first.
	NotKept     int    `json:"not_kept,omitempty"`
	NotKeptLine string `json:"not_kept_line,omitempty"`
	// Index: the applied index it came back to; Took: how long that took.
	Index uint64        `json:"index,omitempty"`
	Took  time.Duration `json:"took_ns,omitempty"`
	// Err: it did not come back or catch up, or its snapshots could not
	// be read.
	Err string `json:"err,omitempty"`
	// Partitions: in a cluster of several, each partition's snapshots and
	// index (Snapshots is then empty and Index partition 0's).
	Partitions []PartitionRestart `json:"partitions,omitempty"`
}

// RestartCheck is the restart of every node after the soak.
type RestartCheck struct {
	Nodes []NodeRestart `json:"nodes"`
	// Sessions read back from the restarted cluster, and how they differ
	// from the final state ("" when they do not).
	Sessions int    `json:"sessions"`
	Served   string `json:"served,omitempty"`
	// Skipped: why the nodes were not started again (the end of the soak
	// failed: the dead nodes are in Nodes).
	Skipped string `json:"skipped,omitempty"`
}

// restartCheck stops the cluster if it still runs, restores every node's
// snapshots offline and, unless the end of the soak failed (endErr),
// restarts every node and compares what the cluster serves with in.Final.
func (s *soaker) restartCheck(ctx context.Context, in CheckInput, endErr error) *RestartCheck {
	rc := &RestartCheck{}
	dead := map[string]string{}
	for _, n := range s.cluster.Nodes {
		if endErr != nil && !n.Running() { // the end stops the nodes only once it succeeded
			dead[n.ID] = fmt.Sprintf("did not come back after its last start during the soak (%v); its log ends:\n%s", n.ExitErr(), harness.Tail(n.Log(), 8))
		}
	}
	s.cluster.StopAll()
	for _, n := range s.cluster.Nodes {
		r := NodeRestart{Node: n.ID, Err: dead[n.ID]}
		if err := s.restoreSnapshots(&r, n); err != nil && r.Err == "" {
			r.Err = "its snapshots could not be read: " + err.Error()
		}
		r.NotKept, r.NotKeptLine = grepFile(n.LogPath, cluster.SnapshotNotKept)
		rc.Nodes = append(rc.Nodes, r)
	}
	if endErr != nil {
		rc.Skipped = "the end of the soak failed: " + endErr.Error()
		return rc
	}
	start := time.Now()
	for i, n := range s.cluster.Nodes {
		if err := n.Start(); err != nil {
			rc.Nodes[i].Err = err.Error()
		}
	}
	if s.partitions() > 1 {
		want := make([]uint64, len(in.PartitionDigests))
		for k, d := range in.PartitionDigests {
			want[k] = d.Index
		}
		s.catchUpPartitions(ctx, rc, want, start)
	} else {
		s.catchUp(ctx, rc, in.DigestIndex, start)
	}
	defer s.cluster.StopAll()
	if _, err := s.leader(ctx); err != nil {
		rc.Served = "no node became ready: " + err.Error()
		return rc
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var err error
	if rc.Sessions, err = compareServed(sctx, s.cl, viewsOfResponses(in.Final)); err != nil {
		rc.Served = err.Error()
	}
	return rc
}

// catchUp waits until every started node has applied index, or exited, or
// restartWait passed, and records each one's outcome.
func (s *soaker) catchUp(ctx context.Context, rc *RestartCheck, index uint64, start time.Time) {
	deadline := start.Add(restartWait)
	for {
		waiting := 0
		for i, n := range s.cluster.Nodes {
			r := &rc.Nodes[i]
			if r.Err != "" || r.Took != 0 {
				continue
			}
			if !n.Running() {
				r.Err = fmt.Sprintf("exited after the restart (%v); its log ends:\n%s", n.ExitErr(), harness.Tail(n.Log(), 8))
				continue
			}
			applied, err := s.appliedIndex(ctx, n)
			r.Index = applied
			if err == nil && applied >= index {
				r.Took = time.Since(start)
				continue
			}
			waiting++
			if time.Now().After(deadline) {
				r.Err = fmt.Sprintf("applied index %d after %s, the soak ended at %d (%v)", applied, restartWait, index, err)
			}
		}
		if waiting == 0 || time.Now().After(deadline) || sleepCtx(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
}

func (s *soaker) appliedIndex(ctx context.Context, n *harness.Node) (uint64, error) {
	conn, err := grpc.NewClient(n.GRPCAddr, s.cluster.ConnOptions()...)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := dexv1.NewAdminServiceClient(conn).NodeState(nctx, &dexv1.NodeStateRequest{})
	if err != nil {
		return 0, err
	}
	return st.AppliedIndex, nil
}

// grepFile counts the lines of path that hold needle and returns the
// first.
func grepFile(path, needle string) (int, string) {
	f, err := os.Open(path)
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	n, first := 0, ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), needle) {
			if n++; n == 1 {
				first = sc.Text()
			}
		}
	}
	return n, first
}
