package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// follower proposes one SendMessage behind each command that leaves a Step
// ready, and reports what became of it.
type follower struct {
	waiting bool
	ready   chan []*fsmpb.Step
	done    chan *fsm.Result
}

func (f *follower) Waiting() bool { return f.waiting }

func (f *follower) Follow(ready []*fsmpb.Step) ([]*fsmpb.Command, func([]*fsm.Result, []error)) {
	f.ready <- ready
	next := []*fsmpb.Command{{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{
		SessionId: ready[0].SessionId, MessageId: "follow-up", Text: "behind it",
	}}}}
	return next, func(res []*fsm.Result, errs []error) {
		if errs[0] != nil {
			f.done <- &fsm.Result{Err: &fsm.Rejection{Reason: errs[0].Error()}}
			return
		}
		f.done <- res[0]
	}
}

// Propose asks the follower, when a poll waits, for the commands to commit
// right behind one that leaves a Step ready, and reports their outcome.
func TestProposeCommitsTheFollowUpRightBehindItsCommand(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	fl := &follower{waiting: true, ready: make(chan []*fsmpb.Step, 4), done: make(chan *fsm.Result, 4)}
	leader.node.SetFollower(fl)

	propose := func(id string) *fsm.Result {
		t.Helper()
		res, err := leader.node.Propose(context.Background(), &fsmpb.Command{Body: &fsmpb.Command_CreateSession{
			CreateSession: &fsmpb.CreateSession{SessionId: id, MessageId: "m1", Message: "hello"},
		}})
		if err != nil {
			t.Fatalf("propose %s: %v", id, err)
		}
		if res.Err != nil {
			t.Fatalf("propose %s: %v", id, res.Err)
		}
		return res
	}
	res := propose("s1")
	var ready []*fsmpb.Step
	select {
	case ready = <-fl.ready:
	default:
		t.Fatal("Propose did not ask the follower while a poll waits")
	}
	if len(ready) != 1 || ready[0].SessionId != "s1" || ready[0].Kind != fsmpb.StepKind_STEP_KIND_RUN_MODEL {
		t.Fatalf("the follower was told of %v; want s1's RunModel", ready)
	}
	var follow *fsm.Result
	select {
	case follow = <-fl.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follow-up's outcome was never reported")
	}
	if follow.Err != nil || follow.Index <= res.Index || follow.SessionID != "s1" {
		t.Fatalf("follow-up: index %d in %q, %v; want after %d in s1, accepted", follow.Index, follow.SessionID, follow.Err, res.Index)
	}

	// No poll waits: nothing is predicted or proposed behind the command
	// (Propose asks before it returns).
	fl.waiting = false
	propose("s2")
	select {
	case r := <-fl.ready:
		t.Fatalf("the follower was asked with no poll waiting: %v", r)
	default:
	}
	leader.node.SetFollower(nil)

	// Every proposal, the follow-up too, leaves the in-flight list once raft
	// answers it.
	deadline := time.Now().Add(10 * time.Second)
	for leader.node.InFlightCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d proposals still in flight after every one was answered", leader.node.InFlightCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
