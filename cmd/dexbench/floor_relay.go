package main

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// How the server process of --stream-floor paces its streams: as deltas
// reach the leader in --stream. There, each stream Worker's model handler
// streams a delta every 1/rate s, and the Worker's one output sender
// carries what its attempts streamed in one AppendOutputs call at a time,
// starting the next no sooner than 10 ms after the last when output is
// waiting (api/client's streamSpacing; an idle sender sends at once); the
// leader relays each call's deltas at once, each to its watch's channel, and
// each watch wakes and sends. So the floor has one relay per Worker
// (--workers), each waking when one of its streams is due, but no sooner
// than floorSpacing after its last wake, and handing each due stream's
// delta to the stream's goroutine through a channel, which sends it.
//
// Not a ticker per stream, which would send every message alone (dearer than
// what the leader does), nor one ticker for every stream, which would send
// them all in one burst a period (cheaper than what it does).

const (
	// floorSpacing is the least time between two wakes of a relay, as
	// between two calls of a loaded Worker's output sender.
	floorSpacing = 10 * time.Millisecond
	// floorWakeBuffer is how many due deltas a stream's goroutine may fall
	// behind; a delta past it is not sent (and not counted by dexbench).
	floorWakeBuffer = 64
)

// floorStream is one stream as its relay sees it.
type floorStream struct {
	wake   chan struct{}
	closed atomic.Bool
	due    time.Time // the next delta's time; the relay's (under its mu)
}

func newFloorStream(first time.Time) *floorStream {
	return &floorStream{wake: make(chan struct{}, floorWakeBuffer), due: first}
}

// floorRelay is one Worker's output sender, for the streams given to it.
type floorRelay struct {
	every   time.Duration
	spacing time.Duration
	added   chan struct{}

	mu      sync.Mutex
	streams []*floorStream
}

func newFloorRelay(every, spacing time.Duration) *floorRelay {
	return &floorRelay{every: every, spacing: spacing, added: make(chan struct{}, 1)}
}

// add gives the relay a stream.
func (r *floorRelay) add(s *floorStream) {
	r.mu.Lock()
	r.streams = append(r.streams, s)
	r.mu.Unlock()
	select {
	case r.added <- struct{}{}:
	default:
	}
}

// relayDue hands a delta to every stream due at now and moves its due
// time a period on (past now, if the relay fell behind); it forgets the
// closed streams. It returns how many deltas it handed over.
func (r *floorRelay) relayDue(now time.Time) (relayed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.streams[:0]
	for _, s := range r.streams {
		if s.closed.Load() {
			continue
		}
		kept = append(kept, s)
		if !s.due.After(now) {
			select {
			case s.wake <- struct{}{}:
				relayed++
			default: // its goroutine is behind: the delta is lost
			}
			s.due = s.due.Add(r.every)
			if !s.due.After(now) {
				behind := now.Sub(s.due)/r.every + 1
				s.due = s.due.Add(behind * r.every)
			}
		}
	}
	clear(r.streams[len(kept):])
	r.streams = kept
	return relayed
}

// nextDue is the earliest due time of the open streams (zero: none).
func (r *floorRelay) nextDue() (next time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.streams {
		if !s.closed.Load() && (next.IsZero() || s.due.Before(next)) {
			next = s.due
		}
	}
	return next
}

// run wakes when a stream is due, no sooner than spacing after its last
// wake, and relays, until ctx ends.
func (r *floorRelay) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var last time.Time
	for ctx.Err() == nil {
		next := r.nextDue()
		wait := time.Duration(math.MaxInt64)
		if !next.IsZero() {
			at := next
			if t := last.Add(r.spacing); t.After(at) {
				at = t
			}
			wait = time.Until(at)
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-r.added: // a new stream may be due sooner
				continue
			case <-timer.C:
			}
		}
		last = time.Now()
		r.relayDue(last)
	}
}

// floorPhase is when, within the period, the k-th stream opened is first
// due: k × the golden ratio (mod 1) of it, so that the streams' deltas
// spread evenly over the period, as those of Workers' turns that started at
// different times do.
func floorPhase(k int64, every time.Duration) time.Duration {
	const golden = 0.6180339887498949
	_, frac := math.Modf(float64(k) * golden)
	return time.Duration(frac * float64(every))
}
