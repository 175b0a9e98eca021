package cluster

import (
	"time"

	"github.com/dexhq/dex/fsm"
)

// ApplyObserver hears each batch of command entries the state machine
// applied, with their results and how long the batch took, measured here,
// outside Apply, which never reads a clock. Metrics hang on it. It runs on
// raft's FSM goroutine: it must be quick and must not wait for Apply.
type ApplyObserver interface {
	ObserveApply(entries []fsm.Entry, results []*fsm.Result, took time.Duration)
}

// applyBatch applies entries and reports them to the observer, if any.
func (r *raftFSM) applyBatch(entries []fsm.Entry) []*fsm.Result {
	if r.obs == nil {
		return r.f.ApplyBatch(entries)
	}
	start := time.Now()
	res := r.f.ApplyBatch(entries)
	r.obs.ObserveApply(entries, res, time.Since(start))
	return res
}
