package fsm

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// driver feeds commands to a state machine the way a leader would: each with
// the next log index and the leader's clock, which the test moves by hand.
type driver struct {
	t     testing.TB
	f     *FSM
	index uint64
	now   int64
	epoch uint64
	halts []error
	// twin, when set, is fed every entry too, in batches of twinBatch: a
	// second state machine that must end byte-identical and give the same
	// results.
	twin      *FSM
	twinBatch int
	pending   []Entry
	results   []*Result
	// batchTwin, when set, gets the same commands grouped twinBatch at a
	// time into Batch entries (the leader's group commit): each command's
	// result must be the one it got alone, and the state the same but for
	// the log indexes (batchedState).
	batchTwin    *FSM
	batchIndex   uint64
	batchPending [][]byte
	batchResults []*Result
	// legacy: Workers' reports go in as the CompleteAttempt and FailAttempt
	// of a log written before ReportAttempt.
	legacy bool
	// applying is the command being applied, for checkQueued.
	applying *fsmpb.Command
}

// options are the state machine options of the driver's machine. A
// benchmark's machine goes without checkQueued, so it times Apply alone.
func (d *driver) options() Options {
	o := Options{OnHalt: func(err error) { d.halts = append(d.halts, err) }}
	if _, bench := d.t.(*testing.B); !bench {
		o.OnApplied = d.checkQueued
	}
	return o
}

// checkQueued holds the command table to its word: a command that leaves a
// Step ready to hand to a Worker says it may queue Steps, or the leader
// would never predict them.
func (d *driver) checkQueued(a *Applied) {
	cmd := d.applying
	if cmd == nil || MayQueueSteps(cmd) {
		return
	}
	for _, id := range a.Steps {
		st := d.f.State().Step(id)
		if st != nil && st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED && st.ReadyAtMs <= cmd.NowMs && Kind(st.Kind).Runner != RunsInCluster {
			d.t.Errorf("%T left Step %s (%s) ready, but the command table says it queues none", cmd.Body, id, st.Kind)
		}
	}
}

// flushBatchTwin applies the commands the batch twin has not seen as one
// Batch entry (a lone one as an entry of its own) and checks each
// command's result against the one the driver got.
func (d *driver) flushBatchTwin() {
	d.t.Helper()
	if d.batchTwin == nil || len(d.batchPending) == 0 {
		return
	}
	data := d.batchPending[0]
	if len(d.batchPending) > 1 {
		var err error
		if data, err = EncodeBatch(d.batchPending); err != nil {
			d.t.Fatalf("encode batch: %v", err)
		}
	}
	d.batchIndex++
	res := d.batchTwin.ApplyEntry(d.batchIndex, data)
	got := []*Result{res}
	if len(d.batchPending) > 1 {
		got = res.Batch
	}
	if len(got) != len(d.batchResults) {
		d.t.Fatalf("a Batch entry of %d commands gave %d results", len(d.batchResults), len(got))
	}
	for i, r := range got {
		want := d.batchResults[i]
		if (r.Err == nil) != (want.Err == nil) || r.Replayed != want.Replayed || r.Epoch != want.Epoch ||
			(r.Err != nil && r.Err.Code != want.Err.Code) {
			d.t.Fatalf("command %d of batch entry %d: alone %+v, in the batch %+v", i+1, d.batchIndex, want, r)
		}
	}
	d.batchPending, d.batchResults = nil, nil
}

// flushTwin applies the entries the twin has not seen as one batch and
// checks its results against the ones the driver got one by one.
func (d *driver) flushTwin() {
	d.t.Helper()
	if d.twin == nil || len(d.pending) == 0 {
		return
	}
	got := d.twin.ApplyBatch(d.pending)
	for i, res := range got {
		want := d.results[i]
		if (res.Err == nil) != (want.Err == nil) || res.Replayed != want.Replayed || res.Epoch != want.Epoch ||
			(res.Err != nil && res.Err.Code != want.Err.Code) {
			d.t.Fatalf("entry %d: one by one %+v, in a batch %+v", d.pending[i].Index, want, res)
		}
	}
	d.pending, d.results = nil, nil
}

var demoTools = []*fsmpb.ToolSpec{
	{Name: "lookup", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ},
	{Name: "save_note", Access: fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE},
	{Name: "send_email", Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT},
	{Name: "deploy", Access: fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, NeedsApproval: true},
	{Name: "build", Access: fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, LongRunning: true, PollIntervalMs: 1000},
	{Name: "calc", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, Inline: true},
}

func newDriver(t testing.TB) *driver {
	d := &driver{t: t, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()}
	d.f = New(d.options())
	d.do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w1", Tools: demoTools, RunsModel: true}}})
	d.newEpoch()
	return d
}

func (d *driver) advance(dt time.Duration) { d.now += dt.Milliseconds() }

// try applies a command and returns its result, rejected or not.
func (d *driver) try(cmd *fsmpb.Command) *Result {
	d.t.Helper()
	if cmd.NowMs == 0 {
		cmd.NowMs = d.now
	}
	data, err := Encode(cmd)
	if err != nil {
		d.t.Fatalf("encode: %v", err)
	}
	d.index++
	d.applying = cmd
	res := d.f.ApplyEntry(d.index, data)
	d.applying = nil
	if d.twin != nil {
		d.pending = append(d.pending, Entry{Index: d.index, Data: data})
		d.results = append(d.results, res)
		if len(d.pending) >= d.twinBatch {
			d.flushTwin()
		}
	}
	if d.batchTwin != nil {
		d.batchPending = append(d.batchPending, data)
		d.batchResults = append(d.batchResults, res)
		if len(d.batchPending) >= d.twinBatch {
			d.flushBatchTwin()
		}
	}
	return res
}

// do applies a command that must be accepted.
func (d *driver) do(cmd *fsmpb.Command) *Result {
	d.t.Helper()
	res := d.try(cmd)
	if res.Err != nil {
		d.t.Fatalf("command %T rejected: %v", cmd.Body, res.Err)
	}
	return res
}

// refused applies a command that must be rejected and change nothing.
func (d *driver) refused(cmd *fsmpb.Command, code Code) *Rejection {
	d.t.Helper()
	before := d.stateBytes()
	res := d.try(cmd)
	if res.Err == nil {
		d.t.Fatalf("command %T was accepted; want a %s rejection", cmd.Body, code)
	}
	if res.Err.Code != code {
		d.t.Fatalf("command %T rejected with %v; want code %s", cmd.Body, res.Err, code)
	}
	if after := d.stateBytes(); !bytes.Equal(before, after) {
		d.t.Fatalf("rejected command %T changed the state", cmd.Body)
	}
	return res.Err
}

// stateBytes is the snapshot of the state without the applied index.
func (d *driver) stateBytes() []byte {
	d.t.Helper()
	var buf bytes.Buffer
	if err := d.f.Snapshot().Persist(&buf); err != nil {
		d.t.Fatalf("persist: %v", err)
	}
	g := New(Options{})
	if err := g.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		d.t.Fatalf("restore: %v", err)
	}
	tx := g.db().Txn(true)
	a := &applier{tx: tx}
	m := a.meta()
	m.AppliedIndex = 0
	a.putMeta(m)
	tx.Commit()
	buf.Reset()
	if err := g.Snapshot().Persist(&buf); err != nil {
		d.t.Fatalf("persist: %v", err)
	}
	return buf.Bytes()
}

func (d *driver) newEpoch() uint64 {
	res := d.do(&fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{NodeId: "n1"}}})
	d.epoch = res.Epoch
	return d.epoch
}

// restart simulates a full cluster restart: the state survives through a
// snapshot and restore, a new leader opens a new epoch and runs the recovery.
func (d *driver) restart() {
	d.t.Helper()
	var buf bytes.Buffer
	if err := d.f.Snapshot().Persist(&buf); err != nil {
		d.t.Fatal(err)
	}
	g := New(d.options())
	if err := g.Restore(&buf); err != nil {
		d.t.Fatal(err)
	}
	d.f = g
	d.advance(5 * time.Second)
	d.newEpoch()
	d.do(&fsmpb.Command{Body: &fsmpb.Command_RestartSessions{RestartSessions: &fsmpb.RestartSessions{Epoch: d.epoch}}})
}

func (d *driver) createSession(id, parent, msg string) {
	d.t.Helper()
	c := &fsmpb.CreateSession{SessionId: id, ParentId: parent}
	if msg != "" {
		c.MessageId, c.Message = id+"-m0", msg
	}
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: c}})
}

var msgCounter int

func (d *driver) send(session, text string) *Result {
	d.t.Helper()
	msgCounter++
	return d.do(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{
		SessionId: session, MessageId: fmt.Sprintf("m%d", msgCounter), Text: text,
	}}})
}

func (d *driver) session(id string) *fsmpb.Session {
	d.t.Helper()
	s := d.f.State().SessionView(id)
	if s == nil {
		d.t.Fatalf("session %s not found", id)
	}
	return s
}

func (d *driver) step(id string) *fsmpb.Step {
	d.t.Helper()
	st := d.f.State().Step(id)
	if st == nil {
		d.t.Fatalf("step %s not found", id)
	}
	return st
}

// stepsOf returns the session's Steps of a kind, in order.
func (d *driver) stepsOf(session string, kind fsmpb.StepKind) []*fsmpb.Step {
	var out []*fsmpb.Step
	for _, st := range d.f.State().Steps(session) {
		if st.Kind == kind {
			out = append(out, st)
		}
	}
	return out
}

// queued returns the one queued Step of a kind in the session.
func (d *driver) queued(session string, kind fsmpb.StepKind) *fsmpb.Step {
	d.t.Helper()
	var found *fsmpb.Step
	for _, st := range d.stepsOf(session, kind) {
		if st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
			if found != nil {
				d.t.Fatalf("two queued %s steps in %s", KindName(kind), session)
			}
			found = st
		}
	}
	if found == nil {
		d.t.Fatalf("no queued %s step in %s", KindName(kind), session)
	}
	return found
}

// latest returns the newest Step of a kind in the session.
func (d *driver) latest(session string, kind fsmpb.StepKind) *fsmpb.Step {
	d.t.Helper()
	steps := d.stepsOf(session, kind)
	if len(steps) == 0 {
		d.t.Fatalf("no %s step in %s", KindName(kind), session)
	}
	return steps[len(steps)-1]
}

// handle is a Worker's grip on one attempt.
type handle struct {
	d   *driver
	st  string
	n   uint32
	tok string
	seq uint64
}

// start hands a queued Step to a Worker, waiting out its backoff first.
func (d *driver) start(st *fsmpb.Step) *handle {
	d.t.Helper()
	if d.now < st.ReadyAtMs {
		d.now = st.ReadyAtMs
	}
	n := uint32(len(st.Attempts)) + 1
	res := d.do(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: st.Id, Attempt: n, WorkerId: d.server(st), Epoch: d.epoch,
	}}})
	return &handle{d: d, st: st.Id, n: n, tok: res.Attempt.Token}
}

// server picks the Worker a broker would: w1 when it serves the Step, else
// the first live Worker that does.
func (d *driver) server(st *fsmpb.Step) string {
	servers := d.f.State().StepServers(st)
	if len(servers) == 0 || slices.Contains(servers, "w1") {
		return "w1"
	}
	return servers[0]
}

func (d *driver) startNext(session string, kind fsmpb.StepKind) *handle {
	d.t.Helper()
	return d.start(d.queued(session, kind))
}

func (h *handle) ref() *fsmpb.AttemptRef {
	h.seq++
	return &fsmpb.AttemptRef{StepId: h.st, Attempt: h.n, Token: h.tok, Seq: h.seq}
}

func (h *handle) claimCmd() *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{Ref: h.ref()}}}
}

func (h *handle) claim() *handle { h.d.t.Helper(); h.d.do(h.claimCmd()); return h }

func (h *handle) output(text string, calls ...*fsmpb.ToolCall) *fsmpb.Command {
	return h.report(&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: text, ToolCalls: calls}}})
}

func (h *handle) answer(text string, calls ...*fsmpb.ToolCall) {
	h.d.t.Helper()
	h.d.do(h.output(text, calls...))
}

func (h *handle) toolResult(content string, isError bool, taskID string) *fsmpb.Command {
	return h.report(&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ToolResult{ToolResult: &fsmpb.ToolResult{Content: content, IsError: isError, TaskId: taskID}}})
}

func (h *handle) result(content string) { h.d.t.Helper(); h.d.do(h.toolResult(content, false, "")) }

func (h *handle) poll(done bool, content string) {
	h.d.t.Helper()
	h.d.do(h.report(&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_PollResult{PollResult: &fsmpb.PollResult{Done: done, Result: &fsmpb.ToolResult{Content: content}}}}))
}

func (h *handle) summary(text string) {
	h.d.t.Helper()
	h.d.do(h.report(&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Summary{Summary: text}}))
}

func (h *handle) failCmd(t fsmpb.ErrorType, msg string) *fsmpb.Command {
	return h.report(&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{ErrorType: t, Error: msg}}})
}

// report is the Worker's ReportAttempt of how the attempt ended, at the next seq.
func (h *handle) report(res *fsmpb.AttemptResult) *fsmpb.Command {
	if h.d.legacy {
		return legacyCommand(h.ref(), res)
	}
	return &fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{Ref: h.ref(), Result: res}}}
}

func (h *handle) fail(t fsmpb.ErrorType, msg string) { h.d.t.Helper(); h.d.do(h.failCmd(t, msg)) }

func (h *handle) expireCmd() *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ExpireAttempt{ExpireAttempt: &fsmpb.ExpireAttempt{StepId: h.st, Attempt: h.n, Epoch: h.d.epoch}}}
}

// expire is the leader failing the attempt of a Worker that died.
func (h *handle) expire() { h.d.t.Helper(); h.d.do(h.expireCmd()) }

func call(id, tool, args string) *fsmpb.ToolCall {
	return &fsmpb.ToolCall{CallId: id, Tool: tool, Arguments: args}
}

func approve(step string, ok bool) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ResolveApproval{ResolveApproval: &fsmpb.ResolveApproval{StepId: step, Approved: ok}}}
}

func answerCmd(step, text string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_AnswerQuestion{AnswerQuestion: &fsmpb.AnswerQuestion{StepId: step, Answer: text}}}
}

func (d *driver) fire(step string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_FireTimer{FireTimer: &fsmpb.FireTimer{StepId: step, Epoch: d.epoch}}}
}

func resume(session string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ResumeSession{ResumeSession: &fsmpb.ResumeSession{SessionId: session}}}
}

// toolResults returns the session's tool-result history entries by call id.
func toolResults(s *fsmpb.Session) map[string]*fsmpb.HistoryEntry {
	out := map[string]*fsmpb.HistoryEntry{}
	for _, e := range s.History {
		if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_TOOL_RESULT {
			out[e.CallId] = e
		}
	}
	return out
}

func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }

func wantStatus(t testing.TB, s *fsmpb.Session, want fsmpb.SessionStatus) {
	t.Helper()
	if s.Status != want {
		t.Fatalf("session %s is %s; want %s (last error %q)", s.Id, StatusName(s.Status), StatusName(want), s.LastError)
	}
}

// SessionView returns a copy of a session with its whole history and inbox
// filled in, as the API showed sessions before it paged them; nil when the
// session does not exist. It reads every row of the session.
func (s *State) SessionView(id string) *fsmpb.Session {
	sess := s.Session(id)
	if sess == nil {
		return nil
	}
	v := proto.Clone(sess).(*fsmpb.Session)
	history, _ := s.History(id, 0, math.MaxInt, math.MaxInt)
	v.History = history
	v.Inbox = s.Inbox(id, math.MaxInt)
	return v
}
