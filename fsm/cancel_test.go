package fsm

import (
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func cancelCmd(session, by, reason string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{SessionId: session, By: by, Reason: reason}}}
}

// cancelled checks what every cancel leaves: the session idle without a
// turn, the Step ended as failed, and the model's note last in the history.
func cancelled(t *testing.T, d *driver, session, stepID string) *fsmpb.Session {
	t.Helper()
	s := d.session(session)
	wantStatus(t, s, sIdle)
	if s.Turn != nil {
		t.Fatalf("the cancelled turn is still there: %v", s.Turn)
	}
	if st := d.step(stepID); st.Status != fsmpb.StepStatus_STEP_STATUS_DONE || st.Outcome != oFailed || !strings.Contains(st.Result, "cancelled by ops") {
		t.Fatalf("step %s after the cancel: %s %s %q", stepID, st.Status, OutcomeName(st.Outcome), st.Result)
	}
	last := s.History[len(s.History)-1]
	if last.Kind != fsmpb.HistoryKind_HISTORY_KIND_NOTE || last.Text != "The previous turn was cancelled by ops: wrong task" {
		t.Fatalf("last history entry %v; want the cancel note", last)
	}
	if n := countEvents(d, session, "turn_cancelled"); n != 1 {
		t.Fatalf("%d turn_cancelled events; want 1", n)
	}
	return s
}

func TestCancel_QueuedRunModelIsDropped(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	st := d.queued("s", kRunModel)
	res := d.do(cancelCmd("s", "ops", "wrong task"))
	if res.StepsCancelled != 1 || res.AttemptsCancelled != 0 {
		t.Fatalf("counts %d steps, %d attempts; want 1, 0", res.StepsCancelled, res.AttemptsCancelled)
	}
	cancelled(t, d, "s", st.Id)
	if got := d.step(st.Id); len(got.Attempts) != 0 {
		t.Fatalf("a queued Step gained attempts: %v", got.Attempts)
	}
	// The next message starts a turn that sees the note.
	d.send("s", "do this instead")
	wantStatus(t, d.session("s"), sRunning)
}

func TestCancel_RunningRunModelIsCancelledAtItsWorker(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	h := d.startNext("s", kRunModel)
	res := d.do(cancelCmd("s", "ops", "wrong task"))
	if res.AttemptsCancelled != 1 {
		t.Fatalf("%d attempts cancelled; want 1", res.AttemptsCancelled)
	}
	cancelled(t, d, "s", h.st)
	at := d.step(h.st).Attempts[0]
	if at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_CANCELLED || at.EndedAtMs != d.now {
		t.Fatalf("attempt after the cancel: %v", at)
	}
	// The Worker's late output is refused: the attempt no longer runs.
	d.refused(h.output("too late"), CodeFailedPrecondition)
}

func TestCancel_RunningSingleAttemptToolIsOutcomeUnknown(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "send_email", `{}`), kSingle)
	d.start(st).claim()
	s := cancelled(t, d, "s", func() string { d.do(cancelCmd("s", "ops", "wrong task")); return st.Id }())
	tr := toolResults(s)["c1"]
	if tr == nil || tr.Outcome != oUnknown || !strings.Contains(tr.Text, "may have run") {
		t.Fatalf("single-attempt result %v; want outcome_unknown", tr)
	}
}

func TestCancel_UnclaimedWriteDidNotRun(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "save_note", `{}`), kCallTool)
	h := d.start(st) // handed over, never claimed: the tool never started
	d.do(cancelCmd("s", "ops", "wrong task"))
	s := cancelled(t, d, "s", st.Id)
	tr := toolResults(s)["c1"]
	if tr == nil || tr.Outcome != oFailed || !strings.HasPrefix(tr.Text, NotRunPrefix) {
		t.Fatalf("unclaimed write result %v; want failed, not run", tr)
	}
	// Its claim now is refused: the Worker must not start the side effect.
	d.refused(h.claimCmd(), CodeFailedPrecondition)
}

func TestCancel_RunningReadFails(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "lookup", `{}`), kCallTool)
	d.start(st).claim()
	d.do(cancelCmd("s", "ops", "wrong task"))
	if tr := toolResults(cancelled(t, d, "s", st.Id))["c1"]; tr == nil || tr.Outcome != oFailed {
		t.Fatalf("read result %v; want failed", tr)
	}
}

func TestCancel_WaitsEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		call *fsmpb.ToolCall
		kind fsmpb.StepKind
	}{
		{"approval", call("c1", "deploy", `{}`), kApproval},
		{"question", call("c1", "ask_user", `{"question":"which env?"}`), kQuestion},
		{"timer", call("c1", "sleep", `{"seconds": 60}`), kTimer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			st := toolTurn(t, d, "s", tc.call, tc.kind)
			wantStatus(t, d.session("s"), sWaiting)
			d.do(cancelCmd("s", "ops", "wrong task"))
			tr := toolResults(cancelled(t, d, "s", st.Id))["c1"]
			if tr == nil || tr.Outcome != oFailed {
				t.Fatalf("result %v; want failed", tr)
			}
			// The wait ended: resolving it now is refused.
			for _, late := range []*fsmpb.Command{approve(st.Id, true), answerCmd(st.Id, "prod"), d.fire(st.Id)} {
				d.refused(late, CodeFailedPrecondition)
			}
		})
	}
}

func TestCancel_PollingTaskIsOutcomeUnknown(t *testing.T) {
	d := newDriver(t)
	longRunning(t, d)
	poll := d.queued("s", kPoll)
	d.do(cancelCmd("s", "ops", "wrong task"))
	tr := toolResults(cancelled(t, d, "s", poll.Id))["c1"]
	if tr == nil || tr.Outcome != oUnknown || !strings.Contains(tr.Text, "task-42") {
		t.Fatalf("long-running result %v; want outcome_unknown naming the task", tr)
	}
}

func TestCancel_QueuedCompactionIsDropped(t *testing.T) {
	d := newDriver(t)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s", CompactionThreshold: 10}}})
	d.send("s", "a first message long enough")
	d.startNext("s", kRunModel).answer("an answer long enough to compact")
	d.send("s", "again")
	st := d.queued("s", kCompact)
	d.do(cancelCmd("s", "ops", "wrong task"))
	cancelled(t, d, "s", st.Id)
}

// Parallel calls: each open call gets its own result, a finished one keeps its own.
func TestCancel_ParallelCallsEachGetAResult(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "go")
	d.startNext("s", kRunModel).answer("calling", call("c1", "lookup", `{}`), call("c2", "save_note", `{}`))
	d.start(d.stepsOf("s", kCallTool)[0]).result("found") // c1, queued first
	d.do(cancelCmd("s", "", ""))
	s := d.session("s")
	wantStatus(t, s, sIdle)
	trs := toolResults(s)
	if trs["c1"].Outcome != oSucceeded || trs["c2"].Outcome != oFailed {
		t.Fatalf("results c1 %v, c2 %v", trs["c1"], trs["c2"])
	}
	if last := s.History[len(s.History)-1]; last.Text != "The previous turn was cancelled by an operator." {
		t.Fatalf("note %q", last.Text)
	}
}

func TestCancel_InboxIsKept(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	d.send("s", "and then this")
	d.do(cancelCmd("s", "ops", "wrong task"))
	s := d.session("s")
	wantStatus(t, s, sIdle)
	if s.InboxCount != 1 {
		t.Fatalf("inbox %d after the cancel; want the 1 waiting message kept", s.InboxCount)
	}
}

func TestCancel_BadInputChangesNothing(t *testing.T) {
	d := newDriver(t)
	d.createSession("idle", "", "")
	d.createSession("busy", "", "hello")
	d.refused(cancelCmd("", "ops", ""), CodeInvalid)
	d.refused(cancelCmd("nope", "ops", ""), CodeNotFound)
	d.refused(cancelCmd("idle", "ops", ""), CodeFailedPrecondition)
	d.refused(cancelCmd("busy", "ops", strings.Repeat("x", maxCancelReason+1)), CodeInvalid)
	d.refused(cancelCmd("busy", strings.Repeat("x", maxIDLength+1), ""), CodeInvalid)
	d.do(cancelCmd("busy", "ops", ""))
	d.refused(cancelCmd("busy", "ops", ""), CodeFailedPrecondition) // twice: no turn left
}

func TestCancel_SurvivesRestart(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	h := d.startNext("s", kRunModel)
	d.do(cancelCmd("s", "ops", "wrong task"))
	d.restart()
	cancelled(t, d, "s", h.st)
}
