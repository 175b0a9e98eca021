package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// keptSessions keeps the events 7..9 of every session: 1..6 were dropped by
// the retention.
type keptSessions struct {
	dexv1.UnimplementedSessionServiceServer

	mu    sync.Mutex
	calls []uint64
}

func (s *keptSessions) WatchSession(req *dexv1.WatchSessionRequest, stream dexv1.SessionService_WatchSessionServer) error {
	s.mu.Lock()
	s.calls = append(s.calls, req.AfterSeq)
	s.mu.Unlock()
	if req.AfterSeq < 6 {
		st, _ := status.New(codes.OutOfRange, "events no longer kept").WithDetails(&dexv1.EventsNotKept{
			SessionId: req.SessionId, AfterSeq: req.AfterSeq, ResumeAfterSeq: 6, FirstKeptSeq: 7,
		})
		return st.Err()
	}
	for seq := max(req.AfterSeq+1, 7); seq <= 9; seq++ {
		if err := stream.Send(&dexv1.Event{Seq: seq, SessionId: req.SessionId}); err != nil {
			return err
		}
	}
	return nil
}

func keptClient(t *testing.T) (*Client, *keptSessions) {
	fs := &keptSessions{}
	n := startNode(t, "A", nil, fs)
	n.setServing(true)
	return dialClient(t, []*node{n}), fs
}

func TestWatchSession_ResumesFromTheFirstKeptEventAndSaysSo(t *testing.T) {
	c, fs := keptClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var gaps []EventsNotKeptError
	var got []uint64
	err := c.WatchSession(ctx, "s1", 2, func(e *dexv1.Event) error {
		got = append(got, e.Seq)
		return nil
	}, OnEventsNotKept(func(g EventsNotKeptError) error {
		gaps = append(gaps, g)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := EventsNotKeptError{SessionID: "s1", After: 2, ResumeAfter: 6, FirstKept: 7}
	if len(gaps) != 1 || gaps[0] != want {
		t.Fatalf("reported gaps %v; want one %v", gaps, want)
	}
	if !slices.Equal(got, []uint64{7, 8, 9}) {
		t.Fatalf("delivered %v; want the kept events 7 8 9", got)
	}
	if !slices.Equal(fs.calls, []uint64{2, 6}) {
		t.Fatalf("watch calls after %v; want 2 then 6", fs.calls)
	}
}

func TestWatchSession_WithoutACallbackDroppedEventsAreAnError(t *testing.T) {
	c, _ := keptClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	delivered := 0
	err := c.WatchSession(ctx, "s1", 0, func(*dexv1.Event) error { delivered++; return nil })
	var gap *EventsNotKeptError
	if !errors.As(err, &gap) || gap.ResumeAfter != 6 || gap.FirstKept != 7 || delivered != 0 {
		t.Fatalf("watch from 0: %v after %d events; want an EventsNotKeptError resuming after 6", err, delivered)
	}
	if want := "events of session s1 after 0 up to 6 are no longer kept (event retention); the first kept is 7"; err.Error() != want {
		t.Fatalf("error %q; want %q", err, want)
	}
	// The callback's error ends the watch.
	stop := errors.New("stop")
	err = c.WatchSession(ctx, "s1", 0, func(*dexv1.Event) error { return nil },
		OnEventsNotKept(func(EventsNotKeptError) error { return stop }))
	if !errors.Is(err, stop) {
		t.Fatalf("watch: %v; want the callback's error", err)
	}
}

// scriptedWatches answers the n-th WatchSession with rounds[n-1], then an
// Unavailable (a takeover) until the last round, which ends the stream.
type scriptedWatches struct {
	dexv1.UnimplementedSessionServiceServer

	rounds [][]*dexv1.Event
	mu     sync.Mutex
	reqs   []*dexv1.WatchSessionRequest
}

func (s *scriptedWatches) WatchSession(req *dexv1.WatchSessionRequest, stream dexv1.SessionService_WatchSessionServer) error {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	s.mu.Unlock()
	for _, e := range s.rounds[n-1] {
		if err := stream.Send(e); err != nil {
			return err
		}
	}
	if n < len(s.rounds) {
		return status.Error(codes.Unavailable, "leader gone")
	}
	return nil
}

func endEvent(typ, step string, attempt uint32, offset uint64) *dexv1.Event {
	return &dexv1.Event{Type: typ, StepId: step, Output: &dexv1.OutputDelta{Attempt: attempt, Offset: offset}}
}

// The server tells a resumed watch an attempt's end again (a held attempt's
// end replayed, or an end told from the state): the watch delivers each
// attempt's end once, and keeps resuming ended attempts from their offsets.
func TestWatchSession_LiveOutputDeliversEachEndOnce(t *testing.T) {
	fs := &scriptedWatches{rounds: [][]*dexv1.Event{
		{outputEvent("st", 1, 0, "Hello"), endEvent("output_ended", "st", 1, 5), outputEvent("st", 2, 0, "Hi")},
		{endEvent("output_ended", "st", 1, 5), endEvent("output_abandoned", "st", 2, 2)},
		{endEvent("output_ended", "st", 1, 5), endEvent("output_abandoned", "st", 2, 2),
			outputEvent("st", 3, 0, "Hey"), endEvent("output_ended", "st", 3, 3)},
	}}
	n := startNode(t, "A", nil, fs)
	n.setServing(true)
	c := dialClient(t, []*node{n})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	err := c.WatchSession(ctx, "s1", 0, func(e *dexv1.Event) error {
		got = append(got, fmt.Sprintf("%s %d %q", e.Type, e.Output.Attempt, e.Output.Text))
		return nil
	}, WithLiveOutput())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`output 1 "Hello"`, `output_ended 1 ""`, `output 2 "Hi"`, `output_abandoned 2 ""`,
		`output 3 "Hey"`, `output_ended 3 ""`}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered\n%q\nwant\n%q", got, want)
	}
	// Ended attempts stay in the request: one missing would be sent from 0.
	var offsets []string
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, r := range fs.reqs {
		var o []string
		for _, x := range r.OutputOffsets {
			o = append(o, fmt.Sprintf("%s#%d@%d", x.StepId, x.Attempt, x.Offset))
		}
		slices.Sort(o)
		offsets = append(offsets, strings.Join(o, " "))
	}
	if want := []string{"", "st#1@5 st#2@2", "st#1@5 st#2@2"}; !slices.Equal(offsets, want) {
		t.Fatalf("resume offsets %q; want %q", offsets, want)
	}
}
