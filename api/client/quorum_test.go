package client

import (
	"errors"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func statusOf(nodes ...[3]string) *dexv1.StatusResponse {
	st := &dexv1.StatusResponse{}
	for _, n := range nodes {
		st.Nodes = append(st.Nodes, &dexv1.NodeStatus{Id: n[0], Suffrage: n[1], State: n[2]})
	}
	return st
}

func TestCheckQuorumCountsTheVotersThatAnswer(t *testing.T) {
	err := CheckQuorum(statusOf([3]string{"n1", "voter", "follower"}, [3]string{"n2", "voter", "unreachable"}, [3]string{"n3", "voter", "unreachable"}))
	var nq *NoQuorumError
	if !errors.As(err, &nq) || nq.Reachable != 1 || nq.Voters != 3 {
		t.Fatalf("one voter of three answering: %v; want a NoQuorumError of 1 of 3", err)
	}
	want := "1 of 3 voters reachable: no quorum (n2, n3 not answering); the cluster serves again once 2 answer"
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	// Two of four is not a majority; a non-voter does not count.
	err = CheckQuorum(statusOf([3]string{"n1", "voter", "candidate"}, [3]string{"n2", "voter", "follower"}, [3]string{"n3", "voter", "unreachable"},
		[3]string{"n4", "voter", "unreachable"}, [3]string{"n5", "nonvoter", "follower"}))
	if !errors.As(err, &nq) || nq.Reachable != 2 || nq.Voters != 4 {
		t.Fatalf("two voters of four answering: %v; want a NoQuorumError of 2 of 4", err)
	}
	for _, ok := range []*dexv1.StatusResponse{
		statusOf([3]string{"n1", "voter", "leader"}, [3]string{"n2", "voter", "follower"}, [3]string{"n3", "voter", "unreachable"}),
		statusOf([3]string{"n1", "voter", "candidate"}),
		statusOf(),
	} {
		if err := CheckQuorum(ok); err != nil {
			t.Errorf("CheckQuorum(%v) = %v; want nil (a majority answers)", ok.Nodes, err)
		}
	}
}
