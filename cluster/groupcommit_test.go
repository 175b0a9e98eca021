package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Once every member records a version that reads Batch entries, commands
// proposed at once share log entries (group commit), and each caller still
// gets its own command's result; every node ends with every command
// applied once.
func TestGroupCommitSharesEntriesAndAnswersEachCommand(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	deadline := time.Now().Add(15 * time.Second)
	for !allApplyBatches(leader.node.State()) {
		if time.Now().After(deadline) {
			t.Fatalf("the members never all recorded log version %d: %v", fsm.LogVersion, leader.node.State().Nodes())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for !leader.node.GroupCommit() {
		if time.Now().After(deadline) {
			t.Fatal("the leader never started group commit")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every member recorded this build's log version: the entries of each
	// version up to it may be written, and none of a newer one.
	if !leader.node.MembersApply(fsm.BatchLogVersion) || !leader.node.MembersApply(fsm.FoldLogVersion) || leader.node.MembersApply(fsm.LogVersion+1) {
		t.Fatalf("MembersApply of versions %d, %d, %d: want true, true, false", fsm.BatchLogVersion, fsm.FoldLogVersion, fsm.LogVersion+1)
	}

	const proposers, each = 32, 20
	before := leader.node.Status().LastIndex
	var wg sync.WaitGroup
	errs := make(chan error, proposers*each)
	for p := range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				id := fmt.Sprintf("s%02d-%02d", p, k)
				res, err := leader.node.Propose(context.Background(), &fsmpb.Command{Body: &fsmpb.Command_CreateSession{
					CreateSession: &fsmpb.CreateSession{SessionId: id, MessageId: "m1", Message: "hello"}}})
				switch {
				case err != nil:
					errs <- fmt.Errorf("%s: %v", id, err)
				case res.Err != nil || res.SessionID != id:
					errs <- fmt.Errorf("%s: answered with session %q, %v", id, res.SessionID, res.Err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	entries := leader.node.Status().LastIndex - before
	if entries >= proposers*each {
		t.Errorf("%d commands took %d log entries: none shared one", proposers*each, entries)
	}
	t.Logf("%d commands in %d log entries", proposers*each, entries)
	c.converged(leader)
	for _, n := range c.running() {
		for p := range proposers {
			for k := range each {
				if id := fmt.Sprintf("s%02d-%02d", p, k); n.node.State().Session(id) == nil {
					t.Fatalf("node %s misses session %s", n.id, id)
				}
			}
		}
	}
}

func allApplyBatches(st *fsm.State) bool {
	nodes := st.Nodes()
	if len(nodes) < 3 {
		return false
	}
	for _, n := range nodes {
		if n.LogVersion < fsm.LogVersion {
			return false
		}
	}
	return true
}

// A member that recorded an older log version holds back the entries of
// the newer ones only: with one at 2, Batch entries may be written and the
// folding commands (version 3) may not.
func TestMembersApply_AnOlderMemberHoldsBackNewerEntriesOnly(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	deadline := time.Now().Add(15 * time.Second)
	for !allApplyBatches(leader.node.State()) {
		if time.Now().After(deadline) {
			t.Fatalf("the members never all recorded log version %d", fsm.LogVersion)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var older *fsmpb.NodeInfo
	for _, n := range leader.node.State().Nodes() {
		if n.Id != leader.node.State().Meta().EpochHolder {
			older = proto.Clone(n).(*fsmpb.NodeInfo)
		}
	}
	older.LogVersion = fsm.BatchLogVersion
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := leader.node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: older}}})
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("record node %s at log version 2: %v", older.Id, err)
	}
	if !leader.node.MembersApply(fsm.BatchLogVersion) || leader.node.MembersApply(fsm.FoldLogVersion) {
		t.Fatalf("with %s at log version 2: MembersApply(2) %t, MembersApply(3) %t; want true, false",
			older.Id, leader.node.MembersApply(fsm.BatchLogVersion), leader.node.MembersApply(fsm.FoldLogVersion))
	}
}
