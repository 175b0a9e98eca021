package console

import (
	"net/http"
	"slices"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// newKey is a fresh idempotency key for a form.
func newKey() string { return client.NewIdempotencyKey() }

// turnView is one turn's Steps, in order.
type turnView struct {
	Number uint64
	Steps  []*dexv1.Step
}

// waitView is a Step waiting for someone: what it asks and how to answer.
type waitView struct {
	Step      *dexv1.Step
	Kind      string // approval, question, timer
	Tool      string
	Arguments string
}

type sessionData struct {
	Session   *dexv1.Session
	LastSeq   uint64
	History   []*dexv1.HistoryEntry
	Turns     []turnView
	Waits     []waitView
	Unknown   []*dexv1.Step // outcome_unknown calls to reconcile
	Unserved  []*dexv1.Step // queued Steps no live Worker serves (WaitingReason set)
	Resumable bool
	StepCount int
	// Folded: the turns whose Steps the cluster folded, newest first.
	Folded []*dexv1.FoldedTurn
	// Partition: the session's, in a cluster of more than one (else nil).
	Partition *partitionView
	// SendKey is the idempotency key of the message form (see manage.go).
	SendKey string
	// Cancellable: the session has a turn to cancel; Closed: it takes no
	// more messages (closed, or closing until its turn ends).
	Cancellable, Closed bool
	// TurnFrom is the first history entry of the turn not yet ended (0:
	// none, or not recorded): a fork there or after is refused.
	TurnFrom uint64
}

// doneNotices are the notices an action's redirect may ask for.
var doneNotices = map[string]string{
	"approved": "Approved: the call runs.", "denied": "Denied: the model is told.",
	"answered": "Answered.", "resumed": "Resumed.", "reconciled": "Reconciled.",
	"sent": "Message sent.", "duplicate": "This message was sent before: it is delivered once.",
	"cancelled": "Cancelled: the turn stopped and the session is idle; its inbox is kept.",
	"closing":   "Closing: the session takes no more messages and closes when its turn ends.",
	"closed":    "Closed: the session takes no more messages and can still be read.",
	"started":   "Session started.", "forked": "Forked: this session's history is a copy of its source's.",
}

func (c *Console) sessionPage(w http.ResponseWriter, r *http.Request) {
	c.showSession(w, r, http.StatusOK, "", doneNotices[r.URL.Query().Get("done")])
}

// showSession reads the session and renders it, with an action's error or
// notice on top.
func (c *Console) showSession(w http.ResponseWriter, r *http.Request, code int, errMsg, notice string) {
	id := r.PathValue("id")
	ctx, cancel := c.apiContext(r)
	defer cancel()
	got, err := c.sessions.GetSession(ctx, id)
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	d := buildSession(got)
	d.SendKey = newKey()
	d.Partition = c.sessionPartition(ctx, id)
	c.render(w, r, code, "session", page{Title: "Session " + id, Nav: "sessions", Error: errMsg, Notice: notice, Data: d})
}

func buildSession(got *dexv1.GetSessionResponse) *sessionData {
	s := got.Session
	d := &sessionData{Session: s, LastSeq: got.LastEventSeq, History: s.History, StepCount: len(got.Steps)}
	calls := map[string]*dexv1.CallState{}
	for _, cs := range s.GetTurn().GetCalls() {
		calls[cs.CallId] = cs
	}
	for _, st := range got.Steps {
		if n := len(d.Turns); n == 0 || d.Turns[n-1].Number != st.Turn {
			d.Turns = append(d.Turns, turnView{Number: st.Turn})
		}
		t := &d.Turns[len(d.Turns)-1]
		t.Steps = append(t.Steps, st)
		if st.WaitingReason != "" {
			d.Unserved = append(d.Unserved, st)
		}
		if st.Outcome == dexv1.Outcome_OUTCOME_UNKNOWN {
			d.Unknown = append(d.Unknown, st)
		}
		if st.Status != dexv1.StepStatus_STEP_STATUS_WAITING {
			continue
		}
		wv := waitView{Step: st, Tool: st.Tool, Arguments: st.Arguments}
		if cs := calls[st.CallId]; cs != nil {
			if wv.Tool == "" {
				wv.Tool = cs.Tool
			}
			if wv.Arguments == "" {
				wv.Arguments = cs.Arguments
			}
		}
		switch st.Kind {
		case dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL:
			wv.Kind = "approval"
		case dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER:
			wv.Kind = "question"
		case dexv1.StepKind_STEP_KIND_AWAIT_TIMER:
			wv.Kind = "timer"
		default:
			continue
		}
		d.Waits = append(d.Waits, wv)
	}
	// Newest turn first: the one running now is what people look for.
	slices.Reverse(d.Turns)
	d.Folded = slices.Clone(got.FoldedTurns)
	slices.Reverse(d.Folded)
	d.Resumable = s.Status == dexv1.SessionStatus_SESSION_STATUS_PAUSED || s.Status == dexv1.SessionStatus_SESSION_STATUS_ERRORED
	d.Cancellable = s.Turn != nil
	d.Closed = s.Status == dexv1.SessionStatus_SESSION_STATUS_CLOSED || s.CloseRequestedAtMs != 0
	if s.Turn != nil {
		d.TurnFrom = s.Turn.FirstHistorySeq
	}
	return d
}
