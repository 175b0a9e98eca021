package cluster

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Follower is the leader's dispatcher as Propose sees it: when a poll waits,
// the Steps a command will queue are predicted before it is proposed, and
// the dispatcher may propose their StartAttempts right behind it. raft then
// commits both in one round, and a waiting Worker holds its task one commit
// after the Step was queued instead of two.
type Follower interface {
	// Waiting reports whether a poll waits, so a prediction is worth making.
	Waiting() bool
	// Follow gets the Steps a command would leave ready and returns the
	// commands to propose behind it, with a function that receives, in
	// order, what became of each once it is applied or has failed.
	Follow(ready []*dexv1.Step) (next []*fsmpb.Command, done func([]*fsm.Result, []error))
}

// SetFollower installs the dispatcher that follows proposals (nil: none).
func (n *Node) SetFollower(f Follower) {
	if f == nil {
		n.follower.Store(nil)
		return
	}
	n.follower.Store(&f)
}

// followUps asks the follower, if a poll waits, for the commands to propose
// right behind cmd.
func (n *Node) followUps(cmd *fsmpb.Command) (next [][]byte, done func([]*fsm.Result, []error)) {
	p := n.follower.Load()
	if p == nil || !fsm.MayQueueSteps(cmd) || !(*p).Waiting() {
		return nil, nil
	}
	ready := n.fsm.Predict(cmd)
	if len(ready) == 0 {
		return nil, nil
	}
	cmds, done := (*p).Follow(ready)
	if len(cmds) == 0 {
		return nil, nil
	}
	next = make([][]byte, len(cmds))
	for i, c := range cmds {
		data, err := fsm.Encode(c)
		if err != nil {
			errs := make([]error, len(cmds))
			for j := range errs {
				errs[j] = err
			}
			done(make([]*fsm.Result, len(cmds)), errs)
			return nil, nil
		}
		next[i] = data
	}
	return next, done
}

// proposeFollowUps appends the follow-up commands behind the one just
// applied to raft and reports their outcomes to done when they are known.
func (n *Node) proposeFollowUps(next [][]byte, done func([]*fsm.Result, []error), timeout time.Duration) {
	futures := make([]raft.ApplyFuture, len(next))
	for i, data := range next {
		futures[i] = n.raft.Apply(data, timeout)
	}
	go func() {
		results := make([]*fsm.Result, len(futures))
		errs := make([]error, len(futures))
		for i, f := range futures {
			if errs[i] = n.proposeError(f.Error()); errs[i] == nil {
				if results[i], _ = f.Response().(*fsm.Result); results[i] == nil {
					errs[i] = fmt.Errorf("raft apply: no state machine result (got %T)", f.Response())
				}
			}
		}
		done(results, errs)
	}()
}
