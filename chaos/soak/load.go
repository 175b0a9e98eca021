package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The soak's clients: each runs a steady mix of calls on sessions of its
// own and logs every call and its answer in the Recorder.

// soakScript drives the Workers' model: each kind of message leads to one
// kind of turn (every tool policy, an approval, a question, a timer, a polled
// tool, failing attempts, a model error, an inline call); compaction comes
// from the sessions created with a small threshold.
const soakScript = `{
  "turns": [
    {"match": "tools", "prefix": true, "outputs": [
      {"tool_calls": [{"tool": "lookup", "arguments": {"q": "{{message}}"}},
                      {"tool": "save_note", "arguments": {"note": "{{message}}"}},
                      {"tool": "send_email", "arguments": {"to": "ops@example.com", "body": "{{message}}"}}]},
      {"text": "Looked up, saved and sent."}]},
    {"match": "deploy", "prefix": true, "outputs": [
      {"tool_calls": [{"tool": "deploy", "arguments": {"env": "{{message}}"}}]},
      {"text": "Deploy handled."}]},
    {"match": "ask", "prefix": true, "outputs": [
      {"tool_calls": [{"tool": "ask_user", "arguments": {"question": "Which one for {{message}}?"}}]},
      {"text": "Thanks for the answer."}]},
    {"match": "sleep", "prefix": true, "outputs": [
      {"tool_calls": [{"tool": "sleep", "arguments": {"seconds": 1}}]},
      {"text": "Woke up."}]},
    {"match": "build", "prefix": true, "outputs": [
      {"tool_calls": [{"tool": "build", "arguments": {"target": "{{message}}"}}]},
      {"text": "Built."}]},
    {"match": "flaky", "prefix": true, "outputs": [
      {"error": {"type": "rate_limit", "message": "slow down"}},
      {"tool_calls": [{"tool": "lookup", "arguments": {"q": "{{message}}"}}]},
      {"text": "Done despite the rate limit."}]},
    {"match": "retry", "prefix": true, "outputs": [
      {"tool_calls": [{"tool": "save_note", "arguments": {"note": "{{message}}", "fail_attempts": 1}},
                      {"tool": "lookup", "arguments": {"q": "{{message}}", "fail_attempts": 1}},
                      {"tool": "send_email", "arguments": {"body": "{{message}}", "error_result": true}}]},
      {"tool_calls": [{"tool": "send_email", "arguments": {"body": "again {{message}}", "fail_attempts": 1}}]},
      {"text": "Retried."}]},
    {"match": "calc", "prefix": true, "outputs": [
      {"inline": [{"tool": "calc", "arguments": {"a": 2, "b": 3, "op": "*"}}], "text": "Six."}]}
  ],
  "compact": [{"error": {"type": "overloaded"}}, {"text": "Summary: {{message}}"}]
}`

var soakMessages = []string{"tools", "deploy", "ask", "sleep", "build", "flaky", "retry", "calc"}

const (
	opTimeout         = 10 * time.Second
	watchFor          = time.Second
	sessionsPerClient = 40
)

type loadClient struct {
	s    *soaker
	id   int
	r    *rand.Rand
	mine []string
	n    int
	// answer to the questions it answers (default "the first one").
	answer string
	// closing: the sessions it closed and has not yet seen closed
	// (lifecycle mode); lastNotFound: its last read was told NotFound.
	closing      []closing
	lastNotFound bool
}

// run makes calls until ctx ends.
func (c *loadClient) run(ctx context.Context) {
	live := sessionsPerClient
	if c.s.lifecycle() {
		live = liveSessionsPerClient
	}
	for ctx.Err() == nil {
		if c.s.lifecycle() {
			c.followClosing(ctx, time.Now())
		}
		x := c.r.IntN(100)
		switch {
		case len(c.mine) == 0 || (x < 12 && len(c.mine) < live):
			c.create(ctx)
		case c.s.lifecycle() && x < 20 && len(c.mine) > live/2:
			c.closeOne()
		case x < 40:
			c.send(ctx, c.pick())
		case x < 88:
			c.read(ctx, c.pick(), true)
		default:
			c.watch(ctx, c.pick())
		}
		_ = sleepCtx(ctx, time.Duration(50+c.r.IntN(150))*time.Millisecond)
	}
}

func (c *loadClient) pick() string { return c.mine[c.r.IntN(len(c.mine))] }

// closeOne closes one of its sessions, which then takes no more of its
// messages.
func (c *loadClient) closeOne() {
	i := c.r.IntN(len(c.mine))
	id := c.mine[i]
	c.mine = append(c.mine[:i], c.mine[i+1:]...)
	c.closeSession(id)
}

func (c *loadClient) message() (text, key string) {
	c.n++
	kind := soakMessages[c.r.IntN(len(soakMessages))]
	return fmt.Sprintf("%s c%d-%d", kind, c.id, c.n), fmt.Sprintf("k%d-%d", c.id, c.n)
}

// call bounds one call by opTimeout, also when the soak ends under it, so
// a call in flight gets its answer (or its timeout) recorded.
func (c *loadClient) call(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return f(ctx)
}

func (c *loadClient) create(ctx context.Context) {
	text, key := c.message()
	c.createWith(text, key, c.r.IntN(4) == 0)
}

// createWith creates a session of its own with the first message text
// (key its id); compact gives it a small compaction threshold.
func (c *loadClient) createWith(text, key string, compact bool) string {
	id := fmt.Sprintf("soak-c%d-%d", c.id, c.n)
	req := &dexv1.CreateSessionRequest{SessionId: id, Message: text, IdempotencyKey: key}
	if compact {
		req.CompactionThreshold = 1500
	}
	op := Op{Client: c.id, Kind: OpCreate, Session: id, Key: key}
	c.s.rec.Begin(&op)
	err := c.call(func(ctx context.Context) error {
		_, err := c.s.cl.CreateSession(ctx, req)
		return err
	})
	c.s.rec.End(&op, err)
	if err == nil || op.Answer == AnsUnknown {
		c.mine = append(c.mine, id)
		c.s.addSession(id)
	}
	return id
}

func (c *loadClient) send(ctx context.Context, id string) {
	text, key := c.message()
	c.sendWith(id, text, key)
}

// sendWith sends text (key its id) to session id.
func (c *loadClient) sendWith(id, text, key string) {
	op := Op{Client: c.id, Kind: OpSend, Session: id, Key: key}
	c.s.rec.Begin(&op)
	err := c.call(func(ctx context.Context) error {
		dup, err := c.s.cl.SendMessage(ctx, id, text, key)
		op.Duplicate = dup
		return err
	})
	c.s.rec.End(&op, err)
}

// errPartial: a read whose answer did not fit one page says nothing whole.
var errPartial = status.Error(codes.OutOfRange, "the session did not fit one page")

// read reads the session in one page and, when resolve is set, answers one
// of its waiting approvals or questions. It reports whether the read got
// the whole session.
func (c *loadClient) read(ctx context.Context, id string, resolve bool) bool {
	_, ok := c.readResp(ctx, id, resolve)
	return ok
}

// readResp is read that also returns what it read.
func (c *loadClient) readResp(ctx context.Context, id string, resolve bool) (*dexv1.GetSessionResponse, bool) {
	op := Op{Client: c.id, Kind: OpRead, Session: id}
	var resp *dexv1.GetSessionResponse
	c.s.rec.Begin(&op)
	err := c.call(func(ctx context.Context) error {
		for {
			var err error
			resp, err = c.s.svc.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: id, HistoryLimit: 1000, StepsLimit: 1000}, grpc.WaitForReady(true))
			if err == nil || ctx.Err() != nil || status.Code(err) != codes.Unavailable {
				if err == nil && (resp.NextHistoryAfterSeq != 0 || resp.NextStepsAfter != 0) {
					return errPartial
				}
				return err
			}
			_ = sleepCtx(ctx, 100*time.Millisecond) // a node that is not the leader: try the next
		}
	})
	if err == nil {
		fillRead(&op, resp)
	}
	c.s.rec.End(&op, err)
	c.lastNotFound = op.Code == codes.NotFound.String()
	if err != nil {
		return nil, false
	}
	if resolve {
		c.resolveWaiting(id, resp.Steps)
	}
	return resp, true
}

// resolveWaiting answers one of the waiting approvals or questions among
// steps, if any.
func (c *loadClient) resolveWaiting(id string, steps []*dexv1.Step) {
	var waiting []*dexv1.Step
	for _, st := range steps {
		if st.Status == dexv1.StepStatus_STEP_STATUS_WAITING && (st.Kind == dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL || st.Kind == dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER) {
			waiting = append(waiting, st)
		}
	}
	if len(waiting) > 0 {
		c.resolve(id, waiting[c.r.IntN(len(waiting))])
	}
}

func fillRead(op *Op, resp *dexv1.GetSessionResponse) {
	keys := sessionKeys(resp)
	for k := range keys {
		op.Keys = append(op.Keys, k)
	}
	sort.Strings(op.Keys)
	s := resp.GetSession()
	op.HistoryLen, op.EventSeq, op.Turns, op.Status = s.HistoryCount, resp.LastEventSeq, s.TurnsCompleted, s.Status.String()
	for _, st := range resp.Steps {
		if st.Status == dexv1.StepStatus_STEP_STATUS_DONE && (st.Kind == dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL || st.Kind == dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER) {
			op.Done = append(op.Done, st.Id)
		}
	}
	sort.Strings(op.Done)
}

func (c *loadClient) resolve(id string, st *dexv1.Step) {
	op := Op{Client: c.id, Kind: OpResolve, Session: id, Step: st.Id}
	c.s.rec.Begin(&op)
	err := c.call(func(ctx context.Context) error {
		if st.Kind == dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER {
			answer := c.answer
			if answer == "" {
				answer = "the first one"
			}
			return c.s.cl.AnswerQuestion(ctx, st.Id, answer)
		}
		approve := c.r.IntN(10) < 7
		return c.s.cl.ResolveApproval(ctx, st.Id, approve, map[bool]string{true: "", false: "not now"}[approve])
	})
	c.s.rec.End(&op, err)
}

// watch follows the session's events from the start for a while.
func (c *loadClient) watch(ctx context.Context, id string) {
	op := Op{Client: c.id, Kind: OpWatch, Session: id}
	c.s.rec.Begin(&op)
	wctx, cancel := context.WithTimeout(context.Background(), watchFor)
	defer cancel()
	var last uint64
	err := c.s.cl.WatchSession(wctx, id, 0, func(ev *dexv1.Event) error {
		if ev.Seq <= last && op.WatchGap == "" {
			op.WatchGap = fmt.Sprintf("watch of %s got seq %d after %d", id, ev.Seq, last)
		}
		last = max(last, ev.Seq)
		return nil
	}, client.OnEventsNotKept(func(g client.EventsNotKeptError) error {
		// The retention dropped the events this watch was to deliver next:
		// it goes on after them, as a user's watch does.
		if g.After != last && op.WatchGap == "" {
			op.WatchGap = fmt.Sprintf("watch of %s at seq %d was told events after %d were dropped", id, last, g.After)
		}
		last = max(last, g.ResumeAfter)
		return nil
	}))
	op.WatchMax = last
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil // the watch ran its time
	}
	c.s.rec.End(&op, err)
}
