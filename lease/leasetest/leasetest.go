// Package leasetest is an in-process stand-in for the Raft cluster in tests of
// the leader-only services: it applies every proposed command to a real state
// machine at once, with the next log index and the proposer's clock.
package leasetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Cluster is a single-node, always-leader cluster without Raft.
type Cluster struct {
	t testing.TB
	// Now stamps commands proposed without a time (time.Now by default).
	// Set it before use.
	Now func() time.Time

	mu       sync.Mutex
	fsm      *fsm.FSM
	index    uint64
	epoch    uint64
	log      []*fsmpb.Command
	failNext map[string]int // command kind → transient failures to inject
	closed   bool
	applied  func(*fsm.Applied)
	front    Proposer // the helpers propose through it (nil: Propose)
}

// New returns a cluster with an empty state machine.
func New(t testing.TB) *Cluster {
	c := &Cluster{t: t, Now: time.Now, failNext: map[string]int{}}
	c.fsm = fsm.New(fsm.Options{
		OnHalt: func(err error) { t.Errorf("state machine halted: %v", err) },
		// Entries are applied under c.mu, so reading c.applied needs no more.
		OnApplied: func(a *fsm.Applied) {
			if c.applied != nil {
				c.applied(a)
			}
		},
	})
	return c
}

// OnApplied sets the function each applied entry is reported to, as the
// real cluster's Config.OnApplied (the leader's broker).
func (c *Cluster) OnApplied(f func(*fsm.Applied)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applied = f
}

// State is the state as applied so far.
func (c *Cluster) State() *fsm.State { return c.fsm.State() }

// Propose applies a command at once. A command without a time gets the wall
// clock, as the real cluster does.
func (c *Cluster) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kind := Kind(cmd)
	if c.closed {
		c.t.Errorf("proposal after the test ended: %s", kind)
		return nil, fmt.Errorf("cluster closed")
	}
	if c.failNext[kind] > 0 {
		c.failNext[kind]--
		c.log = append(c.log, cmd.CloneVT())
		return nil, fmt.Errorf("transient: raft apply timed out")
	}
	cmd = cmd.CloneVT()
	if cmd.NowMs == 0 {
		cmd.NowMs = c.Now().UnixMilli()
	}
	return c.applyLocked(cmd)
}

// ProposeAll applies cmds at once, one behind the other, and then reports
// what became of each to answered, in order, as the real cluster does. A
// command that fails (FailNext) fails those behind it too, as a raft
// proposal that is not answered fails the ones behind it.
func (c *Cluster) ProposeAll(ctx context.Context, cmds []*fsmpb.Command, answered func(i int, res *fsm.Result, err error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	results := make([]*fsm.Result, len(cmds))
	errs := make([]error, len(cmds))
	var failed error
	for i, cmd := range cmds {
		kind := Kind(cmd)
		switch {
		case c.closed:
			c.t.Errorf("proposal after the test ended: %s", kind)
			errs[i] = fmt.Errorf("cluster closed")
		case failed != nil:
			errs[i] = failed
		case c.failNext[kind] > 0:
			c.failNext[kind]--
			c.log = append(c.log, cmd.CloneVT())
			failed = fmt.Errorf("transient: raft apply timed out")
			errs[i] = failed
		default:
			cmd = cmd.CloneVT()
			if cmd.NowMs == 0 {
				cmd.NowMs = c.Now().UnixMilli()
			}
			results[i], errs[i] = c.applyLocked(cmd)
		}
	}
	c.mu.Unlock()
	for i := range cmds {
		answered(i, results[i], errs[i])
	}
	return nil
}

func (c *Cluster) applyLocked(cmd *fsmpb.Command) (*fsm.Result, error) {
	data, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	c.index++
	c.log = append(c.log, cmd)
	return c.fsm.ApplyEntry(c.index, data), nil
}

// Predict is the state machine's prediction of the Steps cmd would leave
// ready (fsm.Predict).
func (c *Cluster) Predict(cmd *fsmpb.Command, inFlight ...*fsmpb.Command) []*fsmpb.Step {
	return c.fsm.Predict(cmd, inFlight...)
}

// ProposeThrough makes the helpers that propose (CreateSession, Complete,
// Do, …) go through p, the leader's proposer, instead of straight to the
// state machine (nil: straight).
func (c *Cluster) ProposeThrough(p Proposer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.front = p
}

// Proposer is the leader's proposer (dispatch.Pipeline).
type Proposer interface {
	Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error)
}

// FailNext makes the next n proposals of a command kind fail with a
// transient error (they are logged, not applied).
func (c *Cluster) FailNext(kind string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext[kind] = n
}

// Close makes every later proposal a test failure.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

// Kind names a command by its body ("StartAttempt", …).
func Kind(cmd *fsmpb.Command) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", cmd.GetBody()), "*fsmpb.Command_")
}

// Proposals returns the proposed commands of a kind (all when kind is "").
func (c *Cluster) Proposals(kind string) []*fsmpb.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*fsmpb.Command
	for _, cmd := range c.log {
		if kind == "" || Kind(cmd) == kind {
			out = append(out, cmd)
		}
	}
	return out
}

// Count is the number of proposals of a kind.
func (c *Cluster) Count(kind string) int { return len(c.Proposals(kind)) }

// Do applies a command that must be accepted (through the leader's
// proposer when one is set: ProposeThrough).
func (c *Cluster) Do(cmd *fsmpb.Command) *fsm.Result {
	c.t.Helper()
	c.mu.Lock()
	var p Proposer = c
	if c.front != nil {
		p = c.front
	}
	c.mu.Unlock()
	res, err := p.Propose(context.Background(), cmd)
	if err != nil {
		c.t.Fatalf("propose %s: %v", Kind(cmd), err)
	}
	if res.Err != nil {
		c.t.Fatalf("%s rejected: %v", Kind(cmd), res.Err)
	}
	return res
}

// BumpEpoch opens a new dispatch epoch, as a new leader does.
func (c *Cluster) BumpEpoch() uint64 {
	c.t.Helper()
	res := c.Do(&fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{NodeId: "n1"}}})
	c.mu.Lock()
	c.epoch = res.Epoch
	c.mu.Unlock()
	return res.Epoch
}

// Epoch is the epoch of the last BumpEpoch.
func (c *Cluster) Epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// RegisterWorker registers a Worker.
func (c *Cluster) RegisterWorker(id string, runsModel bool, tools ...*fsmpb.ToolSpec) {
	c.t.Helper()
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: id, Tools: tools, RunsModel: runsModel}}})
}

// CreateSession creates a session; a non-empty message starts its first turn.
func (c *Cluster) CreateSession(id, message string) {
	c.t.Helper()
	cs := &fsmpb.CreateSession{SessionId: id}
	if message != "" {
		cs.MessageId, cs.Message = id+"-m0", message
	}
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: cs}})
}

// Send sends a message to a session.
func (c *Cluster) Send(session, messageID, text string) {
	c.t.Helper()
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: session, MessageId: messageID, Text: text}}})
}

// Queued returns the session's queued Steps in creation order.
func (c *Cluster) Queued(session string) []*fsmpb.Step {
	var out []*fsmpb.Step
	for _, st := range c.State().Steps(session) {
		if st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
			out = append(out, st)
		}
	}
	return out
}

// Start starts the next attempt of a queued Step in the current epoch and
// returns the attempt. A Step that waits out a retry backoff is started with
// the time it becomes ready, so tests do not sleep through the backoff.
func (c *Cluster) Start(stepID, worker string) *fsmpb.Attempt {
	c.t.Helper()
	st := c.State().Step(stepID)
	if st == nil {
		c.t.Fatalf("step %s not found", stepID)
	}
	res := c.Do(&fsmpb.Command{NowMs: max(c.Now().UnixMilli(), st.ReadyAtMs), Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: stepID, Attempt: uint32(len(st.Attempts)) + 1, WorkerId: worker, Epoch: c.Epoch(),
	}}})
	return res.Attempt
}

// Ref names an attempt the way its Worker does (seq 0).
func Ref(stepID string, at *fsmpb.Attempt) *fsmpb.AttemptRef {
	return &fsmpb.AttemptRef{StepId: stepID, Attempt: at.N, Token: at.Token}
}

// Complete completes a RunModel attempt with a model output.
func (c *Cluster) Complete(ref *fsmpb.AttemptRef, text string, calls ...*fsmpb.ToolCall) {
	c.t.Helper()
	c.Report(ref, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: text, ToolCalls: calls}}})
}

// CompleteTool completes a tool attempt with a result.
func (c *Cluster) CompleteTool(ref *fsmpb.AttemptRef, content string) {
	c.t.Helper()
	c.Report(ref, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ToolResult{ToolResult: &fsmpb.ToolResult{Content: content}}})
}

// Fail fails an attempt with an error type.
func (c *Cluster) Fail(ref *fsmpb.AttemptRef, t fsmpb.ErrorType, msg string) {
	c.t.Helper()
	c.Report(ref, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{ErrorType: t, Error: msg}}})
}

// Report ends an attempt as its Worker reports it, at the attempt's next seq.
func (c *Cluster) Report(ref *fsmpb.AttemptRef, res *fsmpb.AttemptResult) {
	c.t.Helper()
	ref = ref.CloneVT()
	ref.Seq = c.lastSeq(ref) + 1
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{Ref: ref, Result: res}}})
}

func (c *Cluster) lastSeq(ref *fsmpb.AttemptRef) uint64 {
	st := c.State().Step(ref.StepId)
	if st == nil || ref.Attempt == 0 || int(ref.Attempt) > len(st.Attempts) {
		return 0
	}
	return st.Attempts[ref.Attempt-1].LastSeq
}

// Eventually waits, polling, until cond holds or the bound passes.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Call is a tool call of a model output.
func Call(id, tool, args string) *fsmpb.ToolCall {
	return &fsmpb.ToolCall{CallId: id, Tool: tool, Arguments: args}
}

// Tools used by tests.
var (
	Lookup    = &fsmpb.ToolSpec{Name: "lookup", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, Description: "look something up"}
	SaveNote  = &fsmpb.ToolSpec{Name: "save_note", Access: fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE}
	SendEmail = &fsmpb.ToolSpec{Name: "send_email", Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT}
)

// Clock is a clock that moves only when told.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at a fixed date.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now reads the clock.
func (k *Clock) Now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.now
}

// Advance moves the clock forward.
func (k *Clock) Advance(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.now = k.now.Add(d)
}
