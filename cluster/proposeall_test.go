package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// ProposeAll hands its commands to raft one behind the other (or in one
// Batch entry): they commit in order, and what became of each is reported
// in that order.
func TestProposeAllCommitsInOrderAndAnswersEach(t *testing.T) {
	c := newCluster(t, 3)
	for i := range c.nodes {
		c.start(i)
	}
	leader := c.readyLeader()
	cmds := []*fsmpb.Command{
		{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1", MessageId: "m1", Message: "hello"}}},
		{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s1", MessageId: "behind", Text: "behind it"}}},
	}
	type answer struct {
		i   int
		res *fsm.Result
		err error
	}
	answers := make(chan answer, len(cmds))
	if err := leader.node.ProposeAll(context.Background(), cmds, func(i int, res *fsm.Result, err error) { answers <- answer{i, res, err} }); err != nil {
		t.Fatalf("propose: %v", err)
	}
	var last uint64
	for want := range cmds {
		var a answer
		select {
		case a = <-answers:
		case <-time.After(10 * time.Second):
			t.Fatalf("command %d was never answered", want)
		}
		if a.i != want || a.err != nil {
			t.Fatalf("answer %d: command %d, %v; want command %d committed", want, a.i, a.err, want)
		}
		if a.res.Err != nil || a.res.Index < last || a.res.SessionID != "s1" {
			t.Fatalf("command %d: index %d (after %d) in %q, %v; want it accepted in order", want, a.res.Index, last, a.res.SessionID, a.res.Err)
		}
		last = a.res.Index
	}
}
