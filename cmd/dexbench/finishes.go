package main

import (
	"strconv"
	"strings"
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
	// counts keeps, for each range done was asked about, how many of its
	// sessions finished and when the last did, so that a wake-up costs the
	// ranges asked about, not a lookup of every session in them.
	counts map[idRange]*rangeCount
}

type rangeCount struct {
	n    int
	last time.Time
}

func newFinishes() *finishes {
	return &finishes{final: map[string]string{}, at: map[string]time.Time{}, wake: make(chan struct{}, 1), counts: map[idRange]*rangeCount{}}
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
		_, again := f.at[session]
		f.at[session] = now
		for r, c := range f.counts {
			if r.contains(session) {
				if !again {
					c.n++
				}
				c.last = now
			}
		}
	}
	f.mu.Unlock()
	if ok {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// done returns how many sessions of r finished and when the last did. The
// first call for a range counts it once; later ones read the running count.
func (f *finishes) done(r idRange) (n int, last time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.counts[r]; c != nil {
		return c.n, c.last
	}
	c := &rangeCount{}
	for i := range r.n {
		if t, ok := f.at[r.id(i)]; ok {
			c.n++
			if t.After(c.last) {
				c.last = t
			}
		}
	}
	f.counts[r] = c
	return c.n, c.last
}

// contains reports whether the session id is one of r's.
func (r idRange) contains(id string) bool {
	num, ok := strings.CutPrefix(id, r.prefix+"-")
	if !ok {
		return false
	}
	i, err := strconv.Atoi(num)
	return err == nil && i >= r.from && i < r.from+r.n && sessionID(r.prefix, i) == id
}
