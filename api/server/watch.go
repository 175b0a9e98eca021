package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
	livestream "github.com/dexhq/dex/lease/stream"
)

// watchRecheck bounds how long a watch waits before it checks that this node
// still holds the dispatch lease.
const watchRecheck = time.Second

// WatchSession streams a session's events after req.AfterSeq. It waits on
// the session's own events, so other sessions' commands do not wake it. A
// position whose next events the retention dropped is answered OutOfRange
// with an EventsNotKept detail naming where to resume.
func (s *Sessions) WatchSession(req *dexv1.WatchSessionRequest, stream dexv1.SessionService_WatchSessionServer) error {
	ctx := stream.Context()
	if err := required("session_id", req.SessionId); err != nil {
		return err
	}
	after := req.AfterSeq
	live := s.liveOutput(req)
	if live != nil {
		defer live.Close()
	}
	for {
		if err := s.check(ctx); err != nil {
			return err
		}
		st := s.node.State()
		if st.Session(req.SessionId) == nil {
			if st.IsDeleted(req.SessionId) {
				return status.Errorf(codes.NotFound, "session %q was deleted", req.SessionId)
			}
			return status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
		}
		if log := st.EventLog(req.SessionId); log != nil && after < log.DroppedThrough {
			return eventsNotKept(req.SessionId, after, log)
		}
		// Taken from the same state as the read: no change between is missed.
		changed := st.EventsWatch(req.SessionId)
		for _, e := range st.Events(req.SessionId, after) {
			if err := stream.Send(e.API()); err != nil {
				return err
			}
			after = e.Seq
		}
		if err := s.waitForEvents(ctx, stream, changed, st.Abandoned(), live); err != nil {
			return err
		}
	}
}

// waitForEvents waits until the session's events may have changed (or a
// restore replaced the state, or a recheck is due), sending the live
// output that comes meanwhile.
func (s *Sessions) waitForEvents(ctx context.Context, out dexv1.SessionService_WatchSessionServer, changed, abandoned <-chan struct{}, live *livestream.Watcher) error {
	if live == nil {
		recheck := time.NewTimer(watchRecheck)
		defer recheck.Stop()
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-changed:
		case <-abandoned: // a snapshot restore replaced the state
		case <-recheck.C:
		}
		return nil
	}
	// Live output comes tens of times a second a watch: each delta waits in
	// a select of two channels of this watch alone. A goroutine of its own
	// waits for the rest (the restore's channel is every watch's) and closes
	// woke.
	woke, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go func() {
		recheck := time.NewTimer(watchRecheck)
		defer recheck.Stop()
		select {
		case <-ctx.Done():
		case <-changed:
		case <-abandoned:
		case <-recheck.C:
		case <-stop:
			return
		}
		close(woke)
	}()
	liveC := live.C()
	var batch []livestream.Delta
	for {
		select {
		case d, ok := <-liveC:
			if !ok {
				return liveEnded(live)
			}
			var closed bool
			batch, closed = coalesced(batch[:0], d, liveC)
			for _, x := range batch {
				if err := out.Send(outputEvent(x)); err != nil {
					return err
				}
			}
			if closed {
				return liveEnded(live)
			}
		case <-woke:
			if err := ctx.Err(); err != nil {
				return status.FromContextError(err).Err()
			}
			return nil
		}
	}
}

// eventsNotKept is the OutOfRange answer to a watch from a position whose
// next events were dropped.
func eventsNotKept(sessionID string, after uint64, log *fsmpb.EventLog) error {
	first := "no event of it is kept now"
	if log.FirstSeq != 0 {
		first = fmt.Sprintf("the first kept is %d", log.FirstSeq)
	}
	st := status.Newf(codes.OutOfRange,
		"events of session %s after %d up to %d are no longer kept (event retention); %s; watch again with after_seq %d",
		sessionID, after, log.DroppedThrough, first, log.DroppedThrough)
	st, err := st.WithDetails(&dexv1.EventsNotKept{
		SessionId: sessionID, AfterSeq: after, ResumeAfterSeq: log.DroppedThrough, FirstKeptSeq: log.FirstSeq,
	})
	if err != nil {
		return status.Errorf(codes.Internal, "encode the OutOfRange detail: %v", err)
	}
	return st.Err()
}
