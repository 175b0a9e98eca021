package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// When a Worker first held a task of each session: the dispatch times the
// --fairness figures are computed from.

// dispatchLog keeps when a Worker first held a task of each session (the
// Hold hook before the claim) and counts those sessions by id prefix, so a
// phase can wait for a share of its backlog to go out.
type dispatchLog struct {
	mu    sync.Mutex
	at    map[string]time.Time
	count map[string]int
	wake  chan struct{}
}

func newDispatchLog() *dispatchLog {
	return &dispatchLog{at: map[string]time.Time{}, count: map[string]int{}, wake: make(chan struct{}, 1)}
}

func (d *dispatchLog) held(sessionID string) {
	now := time.Now()
	d.mu.Lock()
	if _, seen := d.at[sessionID]; !seen {
		d.at[sessionID] = now
		prefix, _, _ := strings.Cut(sessionID, "-")
		d.count[prefix]++
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatchLog) get(sessionID string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.at[sessionID]
	return t, ok
}

// since returns, for each session of r a Worker held a task of, the ms from
// t0 to the first one.
func (d *dispatchLog) since(t0 time.Time, r idRange) []float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []float64
	for i := range r.n {
		if t, ok := d.at[r.id(i)]; ok {
			out = append(out, ms(t.Sub(t0)))
		}
	}
	return out
}

// waitFor waits until n sessions of prefix were dispatched.
func (d *dispatchLog) waitFor(ctx context.Context, prefix string, n int) error {
	for {
		d.mu.Lock()
		got := d.count[prefix]
		d.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d %s sessions dispatched: %w", got, n, prefix, ctx.Err())
		case <-d.wake:
		}
	}
}
