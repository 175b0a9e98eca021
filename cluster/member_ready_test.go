package cluster_test

import (
	"strings"
	"testing"
	"time"
)

// Every member that follows a live leader is ready (it can forward what it
// does not serve); a member left without a leader is not, and says why.
func TestMemberReadyFollowsTheLeader(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	waitFor(t, 15*time.Second, "every member ready", func() bool {
		for _, n := range c.running() {
			if ok, _ := n.node.MemberReady(); !ok {
				return false
			}
		}
		return true
	})

	// Stop the leader and one follower: the last member has no quorum, so
	// no leader, and stops being ready.
	last := -1
	for i, n := range c.nodes {
		if n != leader && last < 0 {
			last = i
			continue
		}
		c.stop(i)
	}
	survivor := c.nodes[last].node
	var reason string
	waitFor(t, 15*time.Second, "the member without a leader not ready", func() bool {
		var ok bool
		ok, reason = survivor.MemberReady()
		return !ok
	})
	if !strings.Contains(reason, "no leader is known") && !strings.Contains(reason, "no word from the leader") {
		t.Fatalf("the member without a leader says %q; want it to name the missing leader", reason)
	}
}
