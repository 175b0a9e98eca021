package fsm

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func adoptState(t *testing.T, clusterID string, epochs int, nodes []*fsmpb.NodeInfo, sessions ...string) *FSM {
	t.Helper()
	f := New(Options{})
	cmds := []*fsmpb.Command{{Body: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterId{ClusterId: clusterID}}}}
	for range epochs {
		cmds = append(cmds, &fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{NodeId: "n1"}}})
	}
	for _, n := range nodes {
		cmds = append(cmds, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: n}}})
	}
	for _, s := range sessions {
		cmds = append(cmds, &fsmpb.Command{NowMs: 1000, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: s, MessageId: s + "-m", Message: "hi"}}})
	}
	for i, c := range cmds {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if res := f.ApplyEntry(uint64(i+1), data); res.Err != nil {
			t.Fatalf("%v: %v", c, res.Err)
		}
	}
	return f
}

// adopted restores backup into a state machine the way a restore into
// target does.
func adopted(t *testing.T, backup, target *FSM) *State {
	t.Helper()
	var snap, out bytes.Buffer
	if err := backup.Snapshot().Persist(&snap); err != nil {
		t.Fatal(err)
	}
	if err := Adopt(&snap, &out, target.State()); err != nil {
		t.Fatal(err)
	}
	if err := target.Restore(&out); err != nil {
		t.Fatal(err)
	}
	return target.State()
}

func TestAdoptKeepsTheClusterItsIdNodesAndAHigherEpoch(t *testing.T) {
	oldNodes := []*fsmpb.NodeInfo{{Id: "n1", RaftAddress: "old:1", GrpcAddress: "old:2"}}
	newNodes := []*fsmpb.NodeInfo{{Id: "n1", RaftAddress: "new:1", GrpcAddress: "new:2"}, {Id: "n2", RaftAddress: "new:3", GrpcAddress: "new:4"}}
	backup := adoptState(t, "aaaa", 2, oldNodes, "s1", "s2")
	st := adopted(t, backup, adoptState(t, "bbbb", 5, newNodes))
	m := st.Meta()
	if m.ClusterId != "bbbb" || m.Epoch != 5 {
		t.Fatalf("meta = %v, want cluster bbbb and epoch 5 (the target's, higher)", m)
	}
	if got := st.Nodes(); len(got) != 2 || !proto.Equal(got[0], newNodes[0]) || !proto.Equal(got[1], newNodes[1]) {
		t.Fatalf("nodes = %v, want the target's", got)
	}
	if len(st.Sessions()) != 2 || st.Session("s1") == nil || len(st.Steps("s1")) != 1 {
		t.Fatalf("the backup's sessions did not come back: %v", st.Sessions())
	}

	// The backup's epoch is the higher one: it is kept.
	st = adopted(t, adoptState(t, "aaaa", 7, oldNodes, "s1"), adoptState(t, "bbbb", 3, newNodes))
	if m := st.Meta(); m.Epoch != 7 || m.ClusterId != "bbbb" {
		t.Fatalf("meta = %v, want epoch 7 of the backup", m)
	}
}

func TestAdoptRefusesWhatIsNotASnapshot(t *testing.T) {
	target := adoptState(t, "bbbb", 1, nil)
	for name, in := range map[string][]byte{
		"garbage":     []byte("hello world"),
		"bad version": []byte("DEXSNAP\x09"),
		"bad record":  []byte("DEXSNAP\x02\xff\xff\xff"),
		"no meta":     []byte("DEXSNAP\x02"),
	} {
		if err := Adopt(bytes.NewReader(in), &bytes.Buffer{}, target.State()); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: Adopt = %v, want ErrBadSnapshot", name, err)
		}
	}
}

// After a restore the leader bumps the epoch: a command of either cluster's
// old epoch is fenced, one of the new epoch goes through.
func TestAdoptedStateFencesBothClustersEpochs(t *testing.T) {
	backup := adoptState(t, "aaaa", 4, nil, "s1")
	target := adoptState(t, "bbbb", 6, nil)
	st := adopted(t, backup, target)
	step := st.Steps("s1")[0]
	next := st.Meta().AppliedIndex + 100
	propose := func(c *fsmpb.Command) *Result {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		next++
		return target.ApplyEntry(next, data)
	}
	res := propose(&fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{NodeId: "n1"}}})
	if res.Epoch != 7 {
		t.Fatalf("epoch after the bump = %d, want 7 (above the target's 6 and the backup's 4)", res.Epoch)
	}
	for _, old := range []uint64{4, 6} {
		res := propose(&fsmpb.Command{NowMs: 2000, Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: step.Id, Attempt: 1, WorkerId: "w1", Epoch: old}}})
		if res.Err == nil {
			t.Fatalf("a StartAttempt of epoch %d went through after the restore", old)
		}
	}
	res = propose(&fsmpb.Command{NowMs: 2000, Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: step.Id, Attempt: 1, WorkerId: "w1", Epoch: 7}}})
	if res.Err != nil {
		t.Fatalf("StartAttempt of the new epoch: %v", res.Err)
	}
}
