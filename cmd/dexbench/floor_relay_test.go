package main

import (
	"context"
	"testing"
	"time"
)

func TestFloorRelay_HandsEachDueStreamOneDeltaAndMovesItAPeriodOn(t *testing.T) {
	every := 50 * time.Millisecond
	t0 := time.Unix(1000, 0)
	r := newFloorRelay(every, floorSpacing)
	a, b, c := newFloorStream(t0), newFloorStream(t0.Add(20*time.Millisecond)), newFloorStream(t0.Add(60*time.Millisecond))
	for _, s := range []*floorStream{a, b, c} {
		r.add(s)
	}
	if got := r.nextDue(); !got.Equal(t0) {
		t.Fatalf("next due %v; want %v", got, t0)
	}
	if n := r.relayDue(t0.Add(10 * time.Millisecond)); n != 1 || len(a.wake) != 1 || len(b.wake) != 0 {
		t.Fatalf("at +10 ms: %d relayed, a holds %d, b %d; want 1, 1, 0", n, len(a.wake), len(b.wake))
	}
	if !a.due.Equal(t0.Add(every)) {
		t.Errorf("a next due at %v; want a period on", a.due.Sub(t0))
	}
	if got := r.nextDue(); !got.Equal(t0.Add(20 * time.Millisecond)) {
		t.Errorf("next due at %v; want +20ms (b)", got.Sub(t0))
	}
	if n := r.relayDue(t0.Add(55 * time.Millisecond)); n != 2 || len(a.wake) != 2 || len(b.wake) != 1 || len(c.wake) != 0 {
		t.Errorf("at +55 ms: %d relayed, a %d, b %d, c %d; want 2, 2, 1, 0", n, len(a.wake), len(b.wake), len(c.wake))
	}
}

func TestFloorRelay_ABehindStreamGetsOneDeltaAndItsNextDueAfterNow(t *testing.T) {
	every := 50 * time.Millisecond
	t0 := time.Unix(1000, 0)
	r := newFloorRelay(every, floorSpacing)
	s := newFloorStream(t0)
	r.add(s)
	now := t0.Add(500 * time.Millisecond)
	if n := r.relayDue(now); n != 1 || len(s.wake) != 1 {
		t.Errorf("%d relayed, %d waiting; want one delta, not the ten missed", n, len(s.wake))
	}
	if !s.due.After(now) || s.due.After(now.Add(every)) {
		t.Errorf("next due %v after now; want within the next period", s.due.Sub(now))
	}
}

func TestFloorRelay_ForgetsClosedStreamsAndNeverBlocksOnAFullOne(t *testing.T) {
	every := 50 * time.Millisecond
	t0 := time.Unix(1000, 0)
	r := newFloorRelay(every, floorSpacing)
	closed, stuck := newFloorStream(t0), newFloorStream(t0)
	r.add(closed)
	r.add(stuck)
	closed.closed.Store(true)
	if got := r.nextDue(); !got.Equal(t0) {
		t.Errorf("next due %v", got)
	}
	now := t0
	for i := range floorWakeBuffer {
		if n := r.relayDue(now); n != 1 {
			t.Fatalf("relay %d handed %d deltas; want 1", i, n)
		}
		now = now.Add(every)
	}
	if n := r.relayDue(now); n != 0 || len(stuck.wake) != floorWakeBuffer {
		t.Errorf("a stream whose goroutine holds %d deltas was handed %d more; want none", len(stuck.wake), n)
	}
	if len(r.streams) != 1 || r.streams[0] != stuck {
		t.Errorf("the relay keeps %d streams; want only the open one", len(r.streams))
	}
	stuck.closed.Store(true)
	if got := r.nextDue(); !got.IsZero() {
		t.Errorf("every stream closed, yet next due %v", got)
	}
}

func TestFloorRelay_RunHandsDueDeltasOverAndEndsWithItsContext(t *testing.T) {
	r := newFloorRelay(20*time.Millisecond, floorSpacing)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		r.run(ctx)
		close(done)
	}()
	s := newFloorStream(time.Now())
	r.add(s)
	for i := range 3 {
		select {
		case <-s.wake:
		case <-time.After(10 * time.Second):
			t.Fatalf("delta %d never handed over", i)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run kept going after its context ended")
	}
}

func TestFloorPhase_SpreadsTheStreamsOverThePeriod(t *testing.T) {
	every := 50 * time.Millisecond
	buckets := make([]int, 10)
	for k := int64(1); k <= 1000; k++ {
		p := floorPhase(k, every)
		if p < 0 || p >= every {
			t.Fatalf("stream %d starts at %s, outside [0, %s)", k, p, every)
		}
		buckets[p*10/every]++
	}
	for i, n := range buckets {
		if n < 90 || n > 110 {
			t.Errorf("tenth %d of the period holds %d of 1,000 streams; want about 100: %v", i, n, buckets)
		}
	}
}
