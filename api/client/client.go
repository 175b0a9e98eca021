package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// Client calls the SessionService. Reads and idempotent writes are retried
// across Unavailable (a takeover, a follower), the first repeat at once and
// then with backoff, until ctx ends;
// other writes are repeated only when a node answered that it is not the
// leader (nothing was changed).
type Client struct {
	svc   dexv1.SessionServiceClient
	sched dexv1.ScheduleServiceClient
}

// New returns a Client on conn (see Dial).
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{svc: dexv1.NewSessionServiceClient(conn), sched: dexv1.NewScheduleServiceClient(conn)}
}

// NewSessionID returns a new random session id. A caller that picks the id
// itself can retry CreateSession and recognise its own earlier try.
func NewSessionID() string { return wirerules.NewSessionID() }

// NewIdempotencyKey returns a fresh random key for SendMessage.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "key-" + hex.EncodeToString(b[:])
}

// call runs one unary call. It waits for a ready (lease-holding) node
// within ctx. idempotent calls are repeated on every transient error; the
// others only on a refusal that changed nothing.
func call[T any](ctx context.Context, idempotent bool, f func(context.Context, ...grpc.CallOption) (T, error)) (T, error) {
	b := newBackoff()
	for tries := 1; ; tries++ {
		var trailer metadata.MD
		out, err := f(ctx, grpc.Trailer(&trailer), grpc.WaitForReady(true))
		if err == nil {
			return out, nil
		}
		retry := notApplied(err, trailer) || (idempotent && transient(ctx, err))
		if !retry || ctx.Err() != nil {
			return out, err
		}
		if tries == 1 {
			continue // the channel waits for the next ready node: no back-off yet
		}
		if serr := sleep(ctx, b.next()); serr != nil {
			return out, err
		}
	}
}

// CreateSession creates a session. With req.SessionId set the call is
// idempotent and retried: a repeat that finds the session created by an
// earlier try of this call returns it. Without it the server picks the id
// and the call is repeated only when nothing was changed.
func (c *Client) CreateSession(ctx context.Context, req *dexv1.CreateSessionRequest) (*dexv1.Session, error) {
	idem := req.GetSessionId() != ""
	tries := 0
	resp, err := call(ctx, idem, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.CreateSessionResponse, error) {
		tries++
		return c.svc.CreateSession(ctx, req, o...)
	})
	if err == nil {
		return resp.Session, nil
	}
	if idem && tries > 1 && status.Code(err) == codes.AlreadyExists {
		// An earlier try committed before its answer was lost.
		got, gerr := c.GetSession(ctx, req.SessionId)
		if gerr == nil {
			return got.Session, nil
		}
	}
	return nil, err
}

// SendMessage delivers text to a session. When idempotencyKey is empty a key
// is generated; the same key is used on every retry, so the message arrives
// once. It reports whether the cluster had already seen the key.
func (c *Client) SendMessage(ctx context.Context, sessionID, text, idempotencyKey string) (duplicate bool, err error) {
	if idempotencyKey == "" {
		idempotencyKey = NewIdempotencyKey()
	}
	req := &dexv1.SendMessageRequest{SessionId: sessionID, Text: text, IdempotencyKey: idempotencyKey}
	tries := 0
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.SendMessageResponse, error) {
		tries++
		return c.svc.SendMessage(ctx, req, o...)
	})
	if err != nil {
		return false, err
	}
	// A duplicate on a retry is our own earlier try.
	return resp.Duplicate && tries == 1, nil
}

// GetSession returns a session with its whole history and all its Steps,
// reading every page the server answers with.
func (c *Client) GetSession(ctx context.Context, sessionID string) (*dexv1.GetSessionResponse, error) {
	return GetWholeSession(ctx, func(ctx context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
		return call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.GetSessionResponse, error) {
			return c.svc.GetSession(ctx, req, o...)
		})
	}, sessionID)
}

// GetSessionPage returns one page of a session as the server answers req:
// a read, retried across a takeover like GetSession.
func (c *Client) GetSessionPage(ctx context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	return call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.GetSessionResponse, error) {
		return c.svc.GetSession(ctx, req, o...)
	})
}

// GetWholeSession reads a session page by page through get and joins the
// pages: the session of the last page, every history entry, every Step and
// every folded turn.
func GetWholeSession(ctx context.Context, get func(context.Context, *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error), sessionID string) (*dexv1.GetSessionResponse, error) {
	req := &dexv1.GetSessionRequest{SessionId: sessionID}
	var out *dexv1.GetSessionResponse
	var history []*dexv1.HistoryEntry
	var steps []*dexv1.Step
	var folded []*dexv1.FoldedTurn
	historyDone, stepsDone, foldedDone := false, false, false
	for {
		resp, err := get(ctx, req)
		if err != nil {
			return nil, err
		}
		out = resp
		if !historyDone {
			history = append(history, resp.Session.GetHistory()...)
		}
		if !stepsDone {
			steps = append(steps, resp.Steps...)
		}
		if !foldedDone {
			folded = append(folded, resp.FoldedTurns...)
		}
		historyDone = historyDone || resp.NextHistoryAfterSeq == 0
		stepsDone = stepsDone || resp.NextStepsAfter == 0
		foldedDone = foldedDone || resp.NextFoldedAfterTurn == 0
		if historyDone && stepsDone && foldedDone {
			break
		}
		// A part already read whole is asked for from its end: that page
		// is empty, or holds what came since, which this view leaves out.
		req = &dexv1.GetSessionRequest{SessionId: sessionID, HistoryAfterSeq: resp.NextHistoryAfterSeq, StepsAfter: resp.NextStepsAfter,
			FoldedAfterTurn: resp.NextFoldedAfterTurn}
		if historyDone && len(history) > 0 {
			req.HistoryAfterSeq = history[len(history)-1].Seq
		}
		if stepsDone && len(steps) > 0 {
			req.StepsAfter = steps[len(steps)-1].Number
		}
		if foldedDone && len(folded) > 0 {
			req.FoldedAfterTurn = folded[len(folded)-1].Turn
		}
	}
	out.Session.History = history
	out.Steps = steps
	out.FoldedTurns = folded
	out.NextHistoryAfterSeq, out.NextStepsAfter, out.NextFoldedAfterTurn = 0, 0, 0
	return out, nil
}

// ListSessions lists every session, reading every page.
func (c *Client) ListSessions(ctx context.Context) ([]*dexv1.SessionSummary, error) {
	return c.ListSessionsBy(ctx, 0)
}

// WatchSession calls fn with every event of the session after afterSeq, in
// order, until ctx ends, fn returns an error (returned as is), the server
// ends the stream (nil) or answers a definite error. After an Unavailable
// (a takeover) it reconnects and resumes after the last event it delivered,
// so no event is missed or delivered twice.
//
// Events the cluster no longer keeps (its event retention) cannot be
// delivered: with OnEventsNotKept the watch tells the callback which were
// lost and resumes from the first kept event; without it, it returns an
// *EventsNotKeptError.
func (c *Client) WatchSession(ctx context.Context, sessionID string, afterSeq uint64, fn func(*dexv1.Event) error, opts ...WatchOption) error {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	last := afterSeq
	b := newBackoff()
	for {
		err := c.watchOnce(ctx, sessionID, &last, b, fn, o.live)
		var fe fnError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &fe):
			return fe.err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if gap := eventsNotKept(err); gap != nil {
			if o.onNotKept == nil {
				return gap
			}
			if err := o.onNotKept(*gap); err != nil {
				return err
			}
			last = gap.ResumeAfter
			continue
		}
		// A live watch that fell behind resumes from the offsets it holds.
		if !transient(ctx, err) && (o.live == nil || status.Code(err) != codes.ResourceExhausted) {
			return err
		}
		if serr := sleep(ctx, b.next()); serr != nil {
			return serr
		}
	}
}

type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func (c *Client) watchOnce(ctx context.Context, id string, last *uint64, b *backoff, fn func(*dexv1.Event) error, live *liveOffsets) error {
	ctx, cancel := context.WithCancel(toSession(ctx, id))
	defer cancel()
	req := &dexv1.WatchSessionRequest{SessionId: id, AfterSeq: *last}
	if live != nil {
		req.LiveOutput, req.OutputOffsets = true, live.request()
	}
	stream, err := c.svc.WatchSession(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		b.reset()
		if ev.Seq != 0 && ev.Seq <= *last {
			continue // already delivered
		}
		if ev.Output != nil && live != nil {
			if ev = live.trim(ev); ev == nil {
				continue // output or end already delivered
			}
		}
		if err := fn(ev); err != nil {
			return fnError{err}
		}
		if ev.Seq > *last {
			*last = ev.Seq
		}
	}
}

// ResolveApproval approves or denies the tool call waiting in step stepID.
func (c *Client) ResolveApproval(ctx context.Context, stepID string, approved bool, reason string) error {
	req := &dexv1.ResolveApprovalRequest{StepId: stepID, Approved: approved, Reason: reason}
	_, err := call(ctx, false, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ResolveApprovalResponse, error) {
		return c.svc.ResolveApproval(ctx, req, o...)
	})
	return err
}

// AnswerQuestion answers the ask_user question waiting in step stepID.
func (c *Client) AnswerQuestion(ctx context.Context, stepID, answer string) error {
	req := &dexv1.AnswerQuestionRequest{StepId: stepID, Answer: answer}
	_, err := call(ctx, false, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.AnswerQuestionResponse, error) {
		return c.svc.AnswerQuestion(ctx, req, o...)
	})
	return err
}

// ResumeSession resumes a paused or errored session: it retries its kept turn once.
func (c *Client) ResumeSession(ctx context.Context, sessionID string) error {
	return c.ResumeSessionWith(ctx, sessionID, dexv1.ResumeChoice_RESUME_CHOICE_RETRY)
}

// ResumeSessionWith resumes a paused or errored session: RESUME_CHOICE_RETRY
// runs its kept turn once more, RESUME_CHOICE_DROP drops that turn (its tool
// results become error notes) and goes on with the inbox.
func (c *Client) ResumeSessionWith(ctx context.Context, sessionID string, choice dexv1.ResumeChoice) error {
	req := &dexv1.ResumeSessionRequest{SessionId: sessionID, Choice: choice}
	_, err := call(ctx, false, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ResumeSessionResponse, error) {
		return c.svc.ResumeSession(ctx, req, o...)
	})
	return err
}

// ReconcileOutcome settles an outcome_unknown call as succeeded or failed.
func (c *Client) ReconcileOutcome(ctx context.Context, stepID string, outcome dexv1.Outcome, note string) error {
	req := &dexv1.ReconcileOutcomeRequest{StepId: stepID, Outcome: outcome, Note: note}
	_, err := call(ctx, false, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ReconcileOutcomeResponse, error) {
		return c.svc.ReconcileOutcome(ctx, req, o...)
	})
	return err
}

// EditHistory splices an idle, errored or paused session's history: it drops
// the entries from truncateFromSeq on (0: none) and adds note (if any). It
// clears the rejected-turn count. A retry after an ambiguous failure could add
// the note twice, so it is not retried.
func (c *Client) EditHistory(ctx context.Context, sessionID string, truncateFromSeq uint64, note string) (*dexv1.EditHistoryResponse, error) {
	req := &dexv1.EditHistoryRequest{SessionId: sessionID, TruncateFromSeq: truncateFromSeq, Note: note}
	return call(ctx, false, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.EditHistoryResponse, error) {
		return c.svc.EditHistory(ctx, req, o...)
	})
}
