package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// MayQueueSteps reports whether a command can leave a Step ready to hand to
// a Worker: one that starts or moves a turn on, as the command table says.
func MayQueueSteps(cmd *fsmpb.Command) bool {
	c := commandOf(cmd)
	return c != nil && c.queuesSteps
}

// Predict applies cmd to the state as it is now, in a transaction that is
// thrown away, and returns the Steps it would leave queued, ready at the
// command's time and dispatched to a Worker. The leader proposes their
// StartAttempts right behind cmd, so both commit in one round.
//
// inFlight are the commands the leader proposed before cmd and has not seen
// applied yet, in the order proposed: they are applied first, so a command
// that completes what one still in flight began (the second of two tool
// results of a turn) is predicted too. One that the state refuses (already
// applied, or stale) is skipped. Entries applied before cmd may still make
// the guess wrong, and the state machine then refuses those StartAttempts.
// Nothing changes and nothing is reported; Apply runs meanwhile.
func (f *FSM) Predict(cmd *fsmpb.Command, inFlight ...*fsmpb.Command) []*fsmpb.Step {
	if cmd.GetBody() == nil {
		return nil
	}
	if f.Halted() != nil {
		return nil
	}
	// A copy of the state, so the prediction never holds up Apply: raft's
	// goroutine does not wait for a proposer that predicts.
	tx := f.db().Scratch()
	defer tx.Abort()
	probe := &applier{tx: tx}
	m, index := probe.meta(), probe.meta().AppliedIndex
	for _, c := range inFlight {
		if c.GetBody() == nil {
			continue
		}
		index++
		a := &applier{tx: tx, now: c.NowMs, index: index, m: m}
		a.apply(c.CloneVT())
		m = a.meta()
	}
	index++
	a := &applier{tx: tx, now: cmd.NowMs, index: index, m: m}
	if res := a.apply(cmd.CloneVT()); res.Err != nil {
		return nil
	}
	var ready []*fsmpb.Step
	for _, id := range a.touched.steps {
		st := tx.Step(id)
		if st == nil {
			continue
		}
		if st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED && st.ReadyAtMs <= cmd.NowMs && Kind(st.Kind).Runner != RunsInCluster {
			ready = append(ready, st.CloneVT())
		}
	}
	return ready
}
