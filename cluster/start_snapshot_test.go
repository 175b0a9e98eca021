package cluster_test

import "testing"

// A node starts with the state of its newest snapshot before it hears from
// anyone (the entries after it wait for the cluster's commit), then catches
// up on the log after it.
func TestNodeStartsFromItsSnapshotThenTheLogAfterIt(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	createSessions(t, leader, 0, 5)
	c.converged(leader)
	for _, n := range c.running() {
		if err := n.node.Raft().Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", n.id, err)
		}
	}
	createSessions(t, leader, 5, 8)
	c.converged(leader)
	for i := range c.nodes {
		c.stop(i)
	}

	c.start(0) // alone: no quorum, so nothing after the snapshot is applied yet
	if got := sessionCount(c.nodes[0]); got != 5 {
		t.Fatalf("a node started alone holds %d sessions; want the snapshot's 5", got)
	}
	c.start(1)
	c.start(2)
	leader = c.readyLeader()
	c.converged(leader)
	for _, n := range c.running() {
		if got := sessionCount(n); got != 8 {
			t.Fatalf("after the restart %s holds %d sessions; want 8", n.id, got)
		}
	}
}
