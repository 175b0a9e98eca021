package server

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Liveness keeps the Workers' last signs of life in the leader's memory
// (lease.Workers): a Worker silent for the TTL is deregistered.
type Liveness interface {
	Touch(workerID string)
	// Polling marks the Worker alive while its long poll is open.
	Polling(workerID string) (done func())
}

func (w *Workers) touch(workerID string) {
	if w.live != nil && workerID != "" {
		w.live.Touch(workerID)
	}
}

func (w *Workers) polling(workerID string) (done func()) {
	if w.live == nil {
		return func() {}
	}
	return w.live.Polling(workerID)
}

// touchRef counts an attempt's call as a sign of life of the Worker that
// runs it.
func (w *Workers) touchRef(ref *dexv1.AttemptRef) {
	if w.live == nil || ref == nil {
		return
	}
	st := w.node.State().Step(ref.StepId)
	if st == nil || ref.Attempt == 0 || int(ref.Attempt) > len(st.Attempts) {
		return
	}
	w.touch(st.Attempts[ref.Attempt-1].WorkerId)
}
