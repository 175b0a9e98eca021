package main

import (
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestNodeRemoveAsksForYesBeforeRemovingAHealthyVoter(t *testing.T) {
	a := &fakeAdmin{status: threeNodes("n1", "leader", "follower", "unreachable")}
	a.status.Nodes = append(a.status.Nodes, &dexv1.NodeStatus{Id: "n4", Suffrage: "nonvoter", State: "follower"})
	addr := startFakeNode(t, &fakeSessions{}, a, true)

	_, err := run(t, "--addr", addr, "node", "remove", "n2")
	want := "node n2 is a voter that answers (follower): removing it leaves 2 voters, which survive 0 failures; give --yes to remove it"
	if err == nil || err.Error() != want {
		t.Fatalf("removing a healthy voter without --yes: %v; want %q", err, want)
	}
	if len(a.removed) != 0 {
		t.Fatalf("removed %v without --yes", a.removed)
	}
	if out, err := run(t, "--addr", addr, "node", "remove", "n2", "--yes"); err != nil || !strings.Contains(out, "node n2 removed") {
		t.Fatalf("with --yes: %v, %q", err, out)
	}
	// A voter that does not answer is what node remove is for: no --yes.
	if out, err := run(t, "--addr", addr, "node", "remove", "n3"); err != nil || !strings.Contains(out, "node n3 removed") {
		t.Fatalf("removing an unreachable voter: %v, %q", err, out)
	}
	// A non-voter is not in the quorum: no --yes either.
	if out, err := run(t, "--addr", addr, "node", "remove", "n4"); err != nil || !strings.Contains(out, "node n4 removed") {
		t.Fatalf("removing a non-voter: %v, %q", err, out)
	}
	if strings.Join(a.removed, ",") != "n2,n3,n4" {
		t.Fatalf("removed %v; want n2, n3, n4", a.removed)
	}
	// The leader answers too.
	if _, err := run(t, "--addr", addr, "node", "remove", "n1"); err == nil || !strings.Contains(err.Error(), "node n1 is a voter that answers (leader)") {
		t.Fatalf("removing the leader without --yes: %v", err)
	}
}
