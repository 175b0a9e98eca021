package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

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
	Follow(ready []*fsmpb.Step) (next []*fsmpb.Command, done func([]*fsm.Result, []error))
}

// SetFollower installs the dispatcher that follows proposals (nil: none).
func (n *Node) SetFollower(f Follower) {
	if f == nil {
		n.follower.Store(nil)
		return
	}
	n.follower.Store(&f)
}

// maxPredictOver bounds the commands in flight a prediction applies first.
// More in flight means a busy leader, where a poll seldom waits for long;
// the prediction is then made over the applied state alone.
const maxPredictOver = 16

// inFlight keeps the commands this leader proposed and has not seen
// applied, in the order raft got them, so a prediction can apply them
// first. mu also keeps that order: a proposal is recorded and handed to
// raft under it.
type inFlight struct {
	mu   sync.Mutex
	seq  uint64
	cmds []proposed // oldest first
}

type proposed struct {
	seq uint64
	cmd *fsmpb.Command
}

// addLocked records cmds as proposed and returns their sequence numbers.
func (f *inFlight) addLocked(cmds ...*fsmpb.Command) []uint64 {
	seqs := make([]uint64, len(cmds))
	for i, c := range cmds {
		f.seq++
		seqs[i] = f.seq
		f.cmds = append(f.cmds, proposed{seq: f.seq, cmd: c})
	}
	return seqs
}

// listLocked returns the commands in flight for a prediction (nil past
// maxPredictOver).
func (f *inFlight) listLocked() []*fsmpb.Command {
	if len(f.cmds) > maxPredictOver {
		return nil
	}
	out := make([]*fsmpb.Command, len(f.cmds))
	for i, p := range f.cmds {
		out[i] = p.cmd
	}
	return out
}

// done forgets a proposal once raft answered it (applied or failed).
func (f *inFlight) done(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.cmds {
		if p.seq == seq {
			f.cmds = append(f.cmds[:i], f.cmds[i+1:]...)
			return
		}
	}
}

// followUps asks the follower, if a poll waits, for the commands to propose
// right behind cmd. The caller holds n.inFlight.mu.
func (n *Node) followUps(cmd *fsmpb.Command) (cmds []*fsmpb.Command, next [][]byte, done func([]*fsm.Result, []error)) {
	p := n.follower.Load()
	if p == nil || !fsm.MayQueueSteps(cmd) || !(*p).Waiting() {
		return nil, nil, nil
	}
	ready := n.fsm.Predict(cmd, n.inFlight.listLocked()...)
	if len(ready) == 0 {
		return nil, nil, nil
	}
	cmds, done = (*p).Follow(ready)
	if len(cmds) == 0 {
		return nil, nil, nil
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
			return nil, nil, nil
		}
		next[i] = data
	}
	return cmds, next, done
}

// proposeFollowUps appends the follow-up commands behind the one just
// applied to raft and reports their outcomes to done when they are known.
// The caller holds n.inFlight.mu; seqs are the follow-ups' records there.
func (n *Node) proposeFollowUps(next [][]byte, seqs []uint64, done func([]*fsm.Result, []error), timeout time.Duration) {
	futures := make([]raft.ApplyFuture, len(next))
	for i, data := range next {
		futures[i] = n.raft.Apply(data, timeout)
	}
	go func() {
		results := make([]*fsm.Result, len(futures))
		errs := make([]error, len(futures))
		for i, f := range futures {
			errs[i] = n.proposeError(f.Error())
			n.inFlight.done(seqs[i])
			if errs[i] == nil {
				if results[i], _ = f.Response().(*fsm.Result); results[i] == nil {
					errs[i] = fmt.Errorf("raft apply: no state machine result (got %T)", f.Response())
				}
			}
		}
		done(results, errs)
	}()
}
