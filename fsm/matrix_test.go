package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// One test per row of the crash matrix (docs/crash-matrix.md). At this layer a Worker kill
// is the leader expiring the attempt; a server restart is a snapshot, a
// restore, a new epoch and the recovery command.

const (
	kRunModel  = fsmpb.StepKind_STEP_KIND_RUN_MODEL
	kCallTool  = fsmpb.StepKind_STEP_KIND_CALL_TOOL
	kSingle    = fsmpb.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL
	kApproval  = fsmpb.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL
	kQuestion  = fsmpb.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER
	kTimer     = fsmpb.StepKind_STEP_KIND_AWAIT_TIMER
	kPoll      = fsmpb.StepKind_STEP_KIND_POLL_TOOL_TASK
	kCompact   = fsmpb.StepKind_STEP_KIND_COMPACT_CONTEXT
	oSucceeded = fsmpb.Outcome_OUTCOME_SUCCEEDED
	oFailed    = fsmpb.Outcome_OUTCOME_FAILED
	oUnknown   = fsmpb.Outcome_OUTCOME_UNKNOWN
	sIdle      = fsmpb.SessionStatus_SESSION_STATUS_IDLE
	sRunning   = fsmpb.SessionStatus_SESSION_STATUS_RUNNING
	sWaiting   = fsmpb.SessionStatus_SESSION_STATUS_WAITING
	sErrored   = fsmpb.SessionStatus_SESSION_STATUS_ERRORED
	sPaused    = fsmpb.SessionStatus_SESSION_STATUS_PAUSED
)

// toolTurn starts a session whose first model output calls one tool, and
// returns the queued Step of that tool.
func toolTurn(t *testing.T, d *driver, session string, tc *fsmpb.ToolCall, kind fsmpb.StepKind) *fsmpb.Step {
	t.Helper()
	d.createSession(session, "", "go")
	d.startNext(session, kRunModel).answer("calling", tc)
	return d.latest(session, kind)
}

func attemptsOf(st *fsmpb.Step) int { return len(st.Attempts) }

func TestMatrix_RunModel_BeforeAnyOutputReachesCluster(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	d.startNext("s", kRunModel).expire()
	st := d.queued("s", kRunModel)
	if attemptsOf(st) != 1 || st.Attempts[0].Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_EXPIRED {
		t.Fatalf("after a Worker kill the RunModel Step has %d attempts, want 1 expired", attemptsOf(st))
	}
	if st.ReadyAtMs <= d.now {
		t.Fatalf("the retry is not backed off")
	}
	d.start(st).expire()
	d.start(d.queued("s", kRunModel)).expire()
	st = d.step(st.Id)
	if st.Status != fsmpb.StepStatus_STEP_STATUS_DONE || attemptsOf(st) != 3 {
		t.Fatalf("after 3 attempts the Step is %s with %d attempts; want done with 3", st.Status, attemptsOf(st))
	}
	wantStatus(t, d.session("s"), sErrored)
}

func TestMatrix_RunModel_AtMostThreeAttemptsWithin30Minutes(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	d.startNext("s", kRunModel).fail(fsmpb.ErrorType_ERROR_TYPE_OVERLOADED, "busy")
	d.advance(31 * time.Minute)
	d.startNext("s", kRunModel).fail(fsmpb.ErrorType_ERROR_TYPE_OVERLOADED, "busy")
	if n := len(d.stepsOf("s", kRunModel)); n != 1 {
		t.Fatalf("%d RunModel steps", n)
	}
	st := d.stepsOf("s", kRunModel)[0]
	if st.Status != fsmpb.StepStatus_STEP_STATUS_DONE || attemptsOf(st) != 2 {
		t.Fatalf("a retry 31 minutes after the first attempt ran: %s, %d attempts", st.Status, attemptsOf(st))
	}
	wantStatus(t, d.session("s"), sErrored)
}

func TestMatrix_RunModel_FailedTurnAfterToolsRanLeavesNote(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "save_note", `{"text":"x"}`), kCallTool)
	d.start(st).claim().result("saved")
	for range 3 {
		d.startNext("s", kRunModel).expire()
	}
	s := d.session("s")
	wantStatus(t, s, sErrored)
	last := s.History[len(s.History)-1]
	if last.Kind != fsmpb.HistoryKind_HISTORY_KIND_NOTE || !strings.Contains(last.Text, "save_note") || !strings.Contains(last.Text, "Do not call them again") {
		t.Fatalf("no do-not-repeat note naming save_note; last history entry: %v", last)
	}
}

func TestMatrix_RunModel_AfterOutputReachedCluster(t *testing.T) {
	// The Worker sent its output; the leader died before answering. The
	// repeat on the new leader returns the first answer; the model is not
	// called again.
	d := newDriver(t)
	d.createSession("s", "", "hello")
	h := d.startNext("s", kRunModel)
	out := h.output("hi there")
	d.do(out)
	d.restart()
	res := d.try(out)
	if res.Err != nil || !res.Replayed {
		t.Fatalf("repeat of a committed Complete: %v replayed=%v; want the first answer again", res.Err, res.Replayed)
	}
	if n := len(d.stepsOf("s", kRunModel)); n != 1 {
		t.Fatalf("%d RunModel steps after the repeat; want 1", n)
	}
	wantStatus(t, d.session("s"), sIdle)
	// Output lost before commit: the attempt expires and the model runs again.
	d.send("s", "again")
	d.startNext("s", kRunModel).expire()
	st := d.queued("s", kRunModel)
	if attemptsOf(st) != 1 {
		t.Fatalf("want a second attempt queued after the first")
	}
}

func TestMatrix_CallToolIdempotentWrite_BeforeFirstHeartbeat(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "save_note", "{}"), kCallTool)
	key := st.IdempotencyKey
	if key == "" {
		t.Fatal("a write has no idempotency key")
	}
	d.start(st).expire()
	st = d.queued("s", kCallTool)
	if st.Attempts[0].Progress != fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_STARTED {
		t.Fatalf("unclaimed attempt progress %s; want NOT_STARTED", st.Attempts[0].Progress)
	}
	d.start(st).claim().result("ok")
	st = d.step(st.Id)
	if st.IdempotencyKey != key || st.Outcome != oSucceeded || attemptsOf(st) != 2 {
		t.Fatalf("rerun: key %q (want %q), outcome %s, %d attempts", st.IdempotencyKey, key, OutcomeName(st.Outcome), attemptsOf(st))
	}
}

func TestMatrix_CallToolIdempotentWrite_WhileToolRuns(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "save_note", "{}"), kCallTool)
	d.start(st).claim().expire()
	st = d.queued("s", kCallTool)
	if st.Attempts[0].Progress != fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_COMPLETED {
		t.Fatalf("claimed attempt progress %s; want NOT_COMPLETED", st.Attempts[0].Progress)
	}
	key := st.IdempotencyKey
	d.start(st).claim().result("ok")
	if got := d.step(st.Id); got.IdempotencyKey != key || got.Outcome != oSucceeded {
		t.Fatalf("rerun with key %q outcome %s", got.IdempotencyKey, OutcomeName(got.Outcome))
	}
}

func TestMatrix_CallToolRead_WhileToolRuns(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "lookup", "{}"), kCallTool)
	d.start(st).claim().expire()
	d.startNext("s", kCallTool).claim().result("found")
	st = d.step(st.Id)
	if st.Outcome != oSucceeded || attemptsOf(st) != 2 {
		t.Fatalf("read rerun: %s with %d attempts", OutcomeName(st.Outcome), attemptsOf(st))
	}
	d.queued("s", kRunModel) // the tool-result turn
}

func TestMatrix_CallTool_EveryAttemptFails(t *testing.T) {
	cases := []struct {
		name, tool string
		claim      bool
		want       fsmpb.Outcome
		prefix     bool
	}{
		{"read", "lookup", true, oFailed, false},
		{"write claimed", "save_note", true, oUnknown, false},
		{"write never claimed", "save_note", false, oFailed, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t)
			st := toolTurn(t, d, "s", call("c1", c.tool, "{}"), kCallTool)
			for range DefaultToolAttempts {
				h := d.start(d.queued("s", kCallTool))
				if c.claim {
					h.claim()
				}
				h.fail(fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED, "boom")
			}
			st = d.step(st.Id)
			if st.Outcome != c.want || attemptsOf(st) != DefaultToolAttempts {
				t.Fatalf("outcome %s after %d attempts; want %s after %d", OutcomeName(st.Outcome), attemptsOf(st), OutcomeName(c.want), DefaultToolAttempts)
			}
			if got := strings.HasPrefix(st.Result, NotRunPrefix); got != c.prefix {
				t.Fatalf("result %q: not-run prefix %v, want %v", st.Result, got, c.prefix)
			}
			tr := toolResults(d.session("s"))["c1"]
			if tr == nil || tr.Outcome != c.want {
				t.Fatalf("the model is not told: %v", tr)
			}
		})
	}
}

func TestMatrix_CallSingleAttemptTool_BeforeFirstHeartbeat(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "send_email", "{}"), kSingle)
	d.start(st).expire()
	st = d.step(st.Id)
	if st.Status != fsmpb.StepStatus_STEP_STATUS_DONE || attemptsOf(st) != 1 {
		t.Fatalf("single-attempt tool: %s with %d attempts; want done after 1", st.Status, attemptsOf(st))
	}
	if st.Outcome != oFailed || !strings.HasPrefix(st.Result, NotRunPrefix) {
		t.Fatalf("outcome %s %q; want failed with the not-run prefix", OutcomeName(st.Outcome), st.Result)
	}
	if tr := toolResults(d.session("s"))["c1"]; tr == nil || !strings.HasPrefix(tr.Text, NotRunPrefix) {
		t.Fatalf("the model is not told: %v", tr)
	}
	d.queued("s", kRunModel)
	if n := len(d.stepsOf("s", kSingle)); n != 1 {
		t.Fatalf("%d single-attempt steps; it must not run again", n)
	}
}

func TestMatrix_CallSingleAttemptTool_WhileToolRuns(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "send_email", "{}"), kSingle)
	h := d.start(st).claim()
	d.restart() // the attempt survives a server failure until its lease expires
	h.expire()
	st = d.step(st.Id)
	if st.Outcome != oUnknown || attemptsOf(st) != 1 {
		t.Fatalf("outcome %s with %d attempts; want outcome_unknown after 1", OutcomeName(st.Outcome), attemptsOf(st))
	}
	// A late Complete from the cancelled attempt changes nothing.
	d.refused(h.toolResult("sent", false, ""), CodeFailedPrecondition)
	if n := len(d.stepsOf("s", kSingle)); n != 1 {
		t.Fatalf("%d single-attempt steps; want 1", n)
	}
}

func TestMatrix_AwaitToolApproval_WhileItWaits(t *testing.T) {
	d := newDriver(t)
	ap := toolTurn(t, d, "s", call("c1", "deploy", `{"env":"prod"}`), kApproval)
	if ap.Status != fsmpb.StepStatus_STEP_STATUS_WAITING {
		t.Fatalf("approval step %s; want waiting", ap.Status)
	}
	wantStatus(t, d.session("s"), sWaiting)
	d.restart()
	d.restart()
	if n := len(d.stepsOf("s", kCallTool)); n != 0 {
		t.Fatalf("the tool ran before approval: %d steps", n)
	}
	d.do(approve(ap.Id, true))
	d.refused(approve(ap.Id, true), CodeFailedPrecondition)
	d.restart()
	d.startNext("s", kCallTool).claim().result("deployed")
	if n := len(d.stepsOf("s", kCallTool)); n != 1 {
		t.Fatalf("approved tool has %d steps; want exactly 1", n)
	}
}

func TestMatrix_AwaitToolApproval_Denied(t *testing.T) {
	d := newDriver(t)
	ap := toolTurn(t, d, "s", call("c1", "deploy", "{}"), kApproval)
	d.do(approve(ap.Id, false))
	if n := len(d.stepsOf("s", kCallTool)); n != 0 {
		t.Fatalf("a denied tool ran")
	}
	tr := toolResults(d.session("s"))["c1"]
	if tr == nil || tr.Outcome != oFailed || !strings.Contains(tr.Text, "denied") {
		t.Fatalf("denied result: %v", tr)
	}
	d.queued("s", kRunModel)
}

func TestMatrix_AwaitQuestionAnswer_WhileItWaits(t *testing.T) {
	d := newDriver(t)
	q := toolTurn(t, d, "s", call("c1", "ask_user", `{"question":"which env?"}`), kQuestion)
	if q.Prompt != "which env?" {
		t.Fatalf("question %q", q.Prompt)
	}
	d.restart()
	if len(d.stepsOf("s", kRunModel)) != 1 {
		t.Fatal("something ran again while waiting")
	}
	d.do(answerCmd(q.Id, "staging"))
	d.refused(answerCmd(q.Id, "prod"), CodeFailedPrecondition)
	if tr := toolResults(d.session("s"))["c1"]; tr == nil || tr.Text != "staging" {
		t.Fatalf("answer not recorded once: %v", tr)
	}
	d.startNext("s", kRunModel).answer("deploying to staging")
	wantStatus(t, d.session("s"), sIdle)
}

func TestMatrix_AwaitTimer_WhileItWaits(t *testing.T) {
	d := newDriver(t)
	tm := toolTurn(t, d, "s", call("c1", "sleep", `{"seconds": 60}`), kTimer)
	d.refused(d.fire(tm.Id), CodeFailedPrecondition) // not due
	d.restart()
	// Came due during an outage: fires when the cluster is back.
	d.advance(2 * time.Hour)
	d.restart()
	d.do(d.fire(tm.Id))
	d.refused(d.fire(tm.Id), CodeFailedPrecondition)
	if tr := toolResults(d.session("s"))["c1"]; tr == nil || tr.Outcome != oSucceeded {
		t.Fatalf("timer result %v", tr)
	}
	if n := countEvents(d, "s", "call_succeeded"); n != 1 {
		t.Fatalf("the timer resolved %d times; want 1", n)
	}
}

func TestMatrix_AwaitTimer_StaleEpochFromDeposedLeader(t *testing.T) {
	d := newDriver(t)
	tm := toolTurn(t, d, "s", call("c1", "sleep", `{"seconds": 1}`), kTimer)
	old := d.fire(tm.Id)
	d.advance(time.Minute)
	d.newEpoch()
	d.refused(old, CodeFailedPrecondition)
}

func countEvents(d *driver, session, typ string) int {
	n := 0
	for _, e := range d.f.State().Events(session, 0) {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func longRunning(t *testing.T, d *driver) (start *fsmpb.Step) {
	t.Helper()
	start = toolTurn(t, d, "s", call("c1", "build", "{}"), kCallTool)
	d.start(start).claim().do(func(h *handle) *fsmpb.Command { return h.toolResult("", false, "task-42") })
	return d.step(start.Id)
}

func (h *handle) do(f func(*handle) *fsmpb.Command) { h.d.t.Helper(); h.d.do(f(h)) }

func TestMatrix_PollToolTask_BetweenTwoPolls(t *testing.T) {
	d := newDriver(t)
	start := longRunning(t, d)
	d.startNext("s", kPoll).poll(false, "")
	d.restart()
	d.startNext("s", kPoll).poll(false, "")
	d.startNext("s", kPoll).poll(true, "built")
	for _, p := range d.stepsOf("s", kPoll) {
		if p.TaskId != "task-42" {
			t.Fatalf("poll %s polls task %q; want task-42", p.Id, p.TaskId)
		}
	}
	if n := len(d.stepsOf("s", kCallTool)); n != 1 || attemptsOf(d.step(start.Id)) != 1 {
		t.Fatalf("a second task started")
	}
	if tr := toolResults(d.session("s"))["c1"]; tr == nil || tr.Text != "built" {
		t.Fatalf("result %v", tr)
	}
}

func TestMatrix_PollToolTask_DuringAPoll(t *testing.T) {
	d := newDriver(t)
	start := longRunning(t, d)
	p := d.startNext("s", kPoll)
	p.claim().expire()
	pst := d.queued("s", kPoll)
	if pst.Id != p.st || pst.TaskId != "task-42" {
		t.Fatalf("the poll does not run again on the same task")
	}
	d.start(pst).poll(true, "built")
	if attemptsOf(d.step(start.Id)) != 1 || len(d.stepsOf("s", kCallTool)) != 1 {
		t.Fatal("a second task started")
	}
}

// compacting makes a session whose next message compacts the turn before it.
func compacting(t *testing.T, d *driver) {
	t.Helper()
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s", CompactionThreshold: 10}}})
	d.send("s", "a long message over the threshold")
	d.startNext("s", kRunModel).answer("a long answer, too")
	d.send("s", "next")
}

func TestMatrix_CompactContext_DuringTheSummaryCall(t *testing.T) {
	d := newDriver(t)
	compacting(t, d)
	st := d.queued("s", kCompact)
	d.start(st).claim().expire()
	d.startNext("s", kCompact).summary("the user said hi")
	if s := d.session("s"); s.Summaries != 1 || countKind(s, fsmpb.HistoryKind_HISTORY_KIND_SUMMARY) != 1 {
		t.Fatalf("summaries %d; want exactly 1", s.Summaries)
	}
	if attemptsOf(d.step(st.Id)) != 2 || len(d.stepsOf("s", kRunModel)) != 2 {
		t.Fatal("only the summary call runs again")
	}
	if s := d.session("s"); s.CompactedBefore != st.CompactBefore || s.History[len(s.History)-2].Text != "next" {
		t.Fatal("the turn's own message is not kept after the summary")
	}
	d.startNext("s", kRunModel).answer("ok")
}

func TestMatrix_CompactContext_AllAttemptsFail(t *testing.T) {
	d := newDriver(t)
	compacting(t, d)
	for range ModelMaxAttempts {
		d.startNext("s", kCompact).fail(fsmpb.ErrorType_ERROR_TYPE_SERVER_ERROR, "down")
	}
	s := d.session("s")
	wantStatus(t, s, sErrored)
	if s.Summaries != 0 || len(d.stepsOf("s", kRunModel)) != 1 {
		t.Fatal("a failed compaction stored a summary or ran the model")
	}
	d.send("s", "next")
	d.queued("s", kCompact) // the next message compacts again
}

func countKind(s *fsmpb.Session, k fsmpb.HistoryKind) int {
	n := 0
	for _, e := range s.History {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func TestMatrix_IdleSession_WaitingForAUserMessage(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hi")
	d.startNext("s", kRunModel).answer("hello")
	d.restart()
	wantStatus(t, d.session("s"), sIdle)
	if len(d.f.State().StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_QUEUED)) != 0 {
		t.Fatal("something was queued again")
	}
	d.send("s", "more")
	d.queued("s", kRunModel)
}

func TestMatrix_AnyStep_QueuedNotYetHandedToAWorker(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "send_email", "{}"), kSingle)
	d.restart()
	d.restart()
	st = d.step(st.Id)
	if st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED || attemptsOf(st) != 0 {
		t.Fatalf("queued step after restarts: %s with %d attempts", st.Status, attemptsOf(st))
	}
	h := d.start(st)
	if h.n != 1 {
		t.Fatalf("runs as attempt %d; want 1", h.n)
	}
}

func TestMatrix_AnyWait_AfterTheWaitEndedWhileTheTurnMovesOn(t *testing.T) {
	// Resolving the wait and moving the turn on are one committed entry: a
	// crash leaves both or neither; a repeat of the resolution is refused.
	d := newDriver(t)
	d.createSession("s", "", "go")
	d.startNext("s", kRunModel).answer("", call("c1", "ask_user", `{"question":"?"}`), call("c2", "deploy", "{}"))
	qs := d.stepsOf("s", kQuestion)[0]
	ap := d.stepsOf("s", kApproval)[0]
	d.do(answerCmd(qs.Id, "yes"))
	d.restart()
	d.refused(answerCmd(qs.Id, "yes"), CodeFailedPrecondition)
	d.do(approve(ap.Id, true))
	d.restart()
	d.refused(approve(ap.Id, true), CodeFailedPrecondition)
	d.startNext("s", kCallTool).claim().result("done")
	if n := len(d.stepsOf("s", kRunModel)); n != 2 {
		t.Fatalf("%d RunModel steps; want the first and one tool-result turn", n)
	}
	if n := countEvents(d, "s", "call_succeeded"); n != 2 {
		t.Fatalf("%d resolved calls; want 2", n)
	}
}

// The timer named by the same row: FireTimer ends the wait and queues the
// tool-result RunModel in one entry, so a crash right after it leaves one
// firing and one move; the new leader's fire of the same timer is refused.
func TestMatrix_AnyWait_AFiredTimerMovesTheTurnOnce(t *testing.T) {
	d := newDriver(t)
	tm := toolTurn(t, d, "s", call("c1", "sleep", `{"seconds": 1}`), kTimer)
	d.advance(time.Second)
	d.do(d.fire(tm.Id))
	next := d.queued("s", kRunModel) // queued by the FireTimer itself
	d.restart()
	d.refused(d.fire(tm.Id), CodeFailedPrecondition)
	if models := d.stepsOf("s", kRunModel); len(models) != 2 || d.queued("s", kRunModel).Id != next.Id {
		t.Fatalf("%d RunModel steps after the restart; want the first and the one the firing queued", len(models))
	}
	fired := 0
	for _, e := range d.session("s").History {
		if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_TOOL_RESULT && e.CallId == "c1" {
			fired++
		}
	}
	if st := d.step(tm.Id); fired != 1 || countEvents(d, "s", "call_succeeded") != 1 || st.Outcome != oSucceeded {
		t.Fatalf("the timer is recorded %d times in the history, %d call_succeeded events, outcome %s; want once",
			fired, countEvents(d, "s", "call_succeeded"), OutcomeName(st.Outcome))
	}
	d.startNext("s", kRunModel).answer("slept")
	wantStatus(t, d.session("s"), sIdle)
}

func TestMatrix_AnyStep_AfterResultSentBeforeCommit(t *testing.T) {
	for _, first := range []string{"complete", "expire"} {
		t.Run(first+" commits first", func(t *testing.T) {
			d := newDriver(t)
			st := toolTurn(t, d, "s", call("c1", "save_note", "{}"), kCallTool)
			h := d.start(st).claim()
			complete := h.toolResult("saved", false, "")
			expire := h.expireCmd()
			if first == "complete" {
				d.do(complete)
				d.refused(expire, CodeFailedPrecondition)
			} else {
				d.do(expire)
				d.refused(complete, CodeFailedPrecondition)
			}
			st = d.step(st.Id)
			if first == "complete" && st.Outcome != oSucceeded {
				t.Fatalf("committed result lost")
			}
			if first == "expire" && (st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED || st.Attempts[0].Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_EXPIRED) {
				t.Fatalf("failed attempt did not apply the row for the Step: %s", st.Status)
			}
		})
	}
}

func TestMatrix_InlineTool_WhileItRuns(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "2+2?")
	d.startNext("s", kRunModel).expire() // the inline tool ran inside this attempt
	h := d.startNext("s", kRunModel)
	d.do(h.report(&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{
		Text: "4", InlineResults: []*fsmpb.InlineResult{{CallId: "i1", Tool: "calc", Content: "4"}},
	}}}))
	s := d.session("s")
	var inline int
	for _, e := range s.History {
		inline += len(e.InlineResults)
	}
	if inline != 1 {
		t.Fatalf("%d inline results recorded; want the committed output's 1", inline)
	}
	wantStatus(t, s, sIdle)
}

func TestMatrix_AnyToolStep_BeforeFirstHeartbeat(t *testing.T) {
	t.Run("read", func(t *testing.T) {
		d := newDriver(t)
		st := toolTurn(t, d, "s", call("c1", "lookup", "{}"), kCallTool)
		d.start(st).expire()
		st = d.queued("s", kCallTool)
		if st.Attempts[0].Progress != fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_STARTED {
			t.Fatalf("progress %s", st.Attempts[0].Progress)
		}
		d.start(st).claim().result("found")
	})
	t.Run("poll", func(t *testing.T) {
		d := newDriver(t)
		start := longRunning(t, d)
		p := d.startNext("s", kPoll)
		p.expire()
		pst := d.queued("s", kPoll)
		if pst.TaskId != "task-42" || len(pst.Attempts) != 1 {
			t.Fatalf("the poll does not run again on the same task")
		}
		d.start(pst).claim().poll(true, "built")
		if attemptsOf(d.step(start.Id)) != 1 {
			t.Fatal("a second task started")
		}
	})
	t.Run("compaction", func(t *testing.T) {
		d := newDriver(t)
		compacting(t, d)
		d.startNext("s", kCompact).expire()
		d.startNext("s", kCompact).claim().summary("short")
		if s := d.session("s"); s.Summaries != 1 {
			t.Fatalf("%d summaries", s.Summaries)
		}
		d.queued("s", kRunModel)
	})
}
