package main

import (
	"sync"
	"time"
)

// finishes records the sessions whose turn the bench's Workers saw end: the
// Complete of the model's final answer committed, so the session is idle on
// the leader. waitDone reads it instead of listing the sessions over and
// over, which cost the leader as much as a tenth of its CPU at 2,000
// sessions and measured the end only to the poll's tick.
type finishes struct {
	mu    sync.Mutex
	final map[string]string    // Step id → session, for final answers not yet completed
	at    map[string]time.Time // session → when its final answer's Complete returned
	wake  chan struct{}        // one pending wake-up for waitDone
}

func newFinishes() *finishes {
	return &finishes{final: map[string]string{}, at: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// answered notes that the model handler returned the session's final answer
// for this Step.
func (f *finishes) answered(stepID, sessionID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.final[stepID] = sessionID
}

// completed notes that the Worker's Complete for stepID committed; if the
// Step carried a final answer, its session is done.
func (f *finishes) completed(stepID string) {
	now := time.Now()
	f.mu.Lock()
	session, ok := f.final[stepID]
	if ok {
		delete(f.final, stepID)
		f.at[session] = now
	}
	f.mu.Unlock()
	if ok {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// done returns how many sessions of r finished and when the last did.
func (f *finishes) done(r idRange) (n int, last time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range r.n {
		if t, ok := f.at[r.id(i)]; ok {
			n++
			if t.After(last) {
				last = t
			}
		}
	}
	return n, last
}
