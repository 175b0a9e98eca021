package client

import (
	"context"
	"errors"
	"slices"
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
