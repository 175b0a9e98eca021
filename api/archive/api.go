package archive

import (
	"context"
	"errors"
	"fmt"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/archive/format"
	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// apiTries is how many times FromAPI reads a session that changes while
// it reads it before it gives up.
const apiTries = 3

// ErrChanged says a session kept changing while FromAPI read it: its
// pages do not make one consistent session.
var ErrChanged = errors.New("session changed while it was read")

// FromAPI returns the archived form of session id read through the
// SessionService: GetSession page by page, then its kept events through
// WatchSession. It gives the same bytes as FromState for a session that
// does not change meanwhile; one that changes is read again, and after
// apiTries reads ErrChanged is returned. A session the cluster does not
// hold is ErrNotFound.
func FromAPI(ctx context.Context, c *client.Client, id string) ([]byte, error) {
	for try := 1; ; try++ {
		obj, err := readAPI(ctx, c, id)
		if !errors.Is(err, ErrChanged) || try == apiTries {
			return obj, err
		}
	}
}

// pastAll is a page start after every Step and folded turn: a page that
// reads one part asks for none of the other.
const pastAll = math.MaxUint64 - 1

// readAPI reads the session once: the history pages, then the Steps pages,
// then the folded turns' pages (each page asks for as little of the other
// parts as it can), then the events; ErrChanged when a page's header
// differs from the first one's.
func readAPI(ctx context.Context, c *client.Client, id string) ([]byte, error) {
	first, err := getPage(ctx, c, &dexv1.GetSessionRequest{SessionId: id, StepsLimit: 1})
	if err != nil {
		return nil, err
	}
	if got, want := len(first.Session.Inbox), int(first.Session.InboxCount); got != want {
		return nil, fmt.Errorf("session %s keeps %d inbox messages, more than one answer of GetSession shows (%d): export it from the leader's state", id, want, got)
	}
	e := format.NewEncoder()
	e.Header(first.Session, first.LastEventSeq)
	var lastSeq uint64
	for resp := first; ; {
		for _, h := range resp.Session.History {
			e.History(h)
			lastSeq = h.Seq
		}
		if resp.NextHistoryAfterSeq == 0 {
			break
		}
		if resp, err = samePage(ctx, c, first, &dexv1.GetSessionRequest{SessionId: id, HistoryAfterSeq: lastSeq, StepsLimit: 1}); err != nil {
			return nil, err
		}
	}
	for after := uint64(0); ; {
		resp, err := samePage(ctx, c, first, &dexv1.GetSessionRequest{SessionId: id, HistoryAfterSeq: lastSeq, HistoryLimit: 1, StepsAfter: after, FoldedAfterTurn: pastAll})
		if err != nil {
			return nil, err
		}
		for _, s := range resp.Steps {
			e.Step(s)
			after = s.Number
		}
		if resp.NextStepsAfter == 0 {
			break
		}
	}
	for after := uint64(0); ; {
		resp, err := samePage(ctx, c, first, &dexv1.GetSessionRequest{SessionId: id, HistoryAfterSeq: lastSeq, HistoryLimit: 1, StepsAfter: pastAll, FoldedAfterTurn: after})
		if err != nil {
			return nil, err
		}
		for _, f := range resp.FoldedTurns {
			e.Folded(f)
			after = f.Turn
		}
		if resp.NextFoldedAfterTurn == 0 {
			break
		}
	}
	if err := readEvents(ctx, c, id, first.LastEventSeq, e); err != nil {
		return nil, err
	}
	// The events were read after the pages: the session must not have
	// moved on meanwhile.
	if _, err := samePage(ctx, c, first, &dexv1.GetSessionRequest{SessionId: id, HistoryLimit: 1, StepsLimit: 1}); err != nil {
		return nil, err
	}
	return e.Finish()
}

// samePage reads a page and checks it shows the session as first did.
func samePage(ctx context.Context, c *client.Client, first *dexv1.GetSessionResponse, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	resp, err := getPage(ctx, c, req)
	if err != nil {
		return nil, err
	}
	if !sameHeader(first, resp) {
		return nil, fmt.Errorf("%w: %s", ErrChanged, req.SessionId)
	}
	return resp, nil
}

func getPage(ctx context.Context, c *client.Client, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	resp, err := c.GetSessionPage(ctx, req)
	if status.Code(err) == codes.NotFound {
		return nil, notFound(status.Convert(err).Message())
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", req.SessionId, err)
	}
	return resp, nil
}

// sameHeader reports whether two pages show the session in the same state.
func sameHeader(a, b *dexv1.GetSessionResponse) bool {
	x, y := proto.CloneOf(a.Session), proto.CloneOf(b.Session)
	x.History, y.History = nil, nil
	return a.LastEventSeq == b.LastEventSeq && proto.Equal(x, y)
}

// errCaughtUp ends the watch of readEvents once it reached the last event.
var errCaughtUp = errors.New("caught up")

// readEvents adds the session's kept events up to last: it watches from
// the first, skipping what the event retention dropped.
func readEvents(ctx context.Context, c *client.Client, id string, last uint64, e *format.Encoder) error {
	if last == 0 {
		return nil
	}
	err := c.WatchSession(ctx, id, 0, func(ev *dexv1.Event) error {
		if ev.Seq > last {
			return fmt.Errorf("%w: %s", ErrChanged, id)
		}
		e.Event(ev)
		if ev.Seq == last {
			return errCaughtUp
		}
		return nil
	}, client.OnEventsNotKept(func(gap client.EventsNotKeptError) error {
		if gap.ResumeAfter >= last {
			return errCaughtUp // none kept up to last
		}
		return nil
	}))
	switch {
	case errors.Is(err, errCaughtUp):
		return nil
	case status.Code(err) == codes.NotFound:
		return notFound(status.Convert(err).Message())
	case err == nil:
		return fmt.Errorf("the watch of session %s ended before its event %d", id, last)
	}
	return fmt.Errorf("read the events of session %s: %w", id, err)
}
