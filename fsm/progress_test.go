package fsm

import (
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// docs/attempts.md: attempt progress, and every Worker call being idempotent.

func TestProgress_NotStarted_NoAttemptWasEverClaimed(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "save_note", "{}"), kCallTool)
	for range DefaultToolAttempts {
		d.start(d.queued("s", kCallTool)).expire()
	}
	st = d.step(st.Id)
	for _, at := range st.Attempts {
		if at.Progress != fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_STARTED {
			t.Fatalf("attempt %d progress %s; want NOT_STARTED", at.N, at.Progress)
		}
	}
	if st.Outcome != oFailed || !strings.HasPrefix(st.Result, NotRunPrefix) {
		t.Fatalf("a write that never ran records %s %q; want failed with the not-run prefix", OutcomeName(st.Outcome), st.Result)
	}
}

func TestProgress_NotCompleted_OnceAnyAttemptWasClaimed(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "save_note", "{}"), kCallTool)
	d.start(st).claim().expire()
	d.startNext("s", kCallTool).expire() // not claimed itself, but the call may have run
	d.startNext("s", kCallTool).fail(fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED, "x")
	st = d.step(st.Id)
	for _, at := range st.Attempts {
		if at.Progress != fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_COMPLETED {
			t.Fatalf("attempt %d progress %s; want NOT_COMPLETED", at.N, at.Progress)
		}
	}
	if st.Outcome != oUnknown {
		t.Fatalf("write outcome %s; want outcome_unknown", OutcomeName(st.Outcome))
	}
}

// UNSPECIFIED progress (no progress known) reads as NOT_COMPLETED: the tool
// may have run. The state machine records an exact progress on every failed
// attempt it ends; this pins the rule for an attempt that carries none.
func TestProgress_UnspecifiedReadsAsNotCompleted(t *testing.T) {
	unspecified := &fsmpb.Attempt{N: 3, Status: fsmpb.AttemptStatus_ATTEMPT_STATUS_FAILED, Error: "connection reset",
		Progress: fsmpb.AttemptProgress_ATTEMPT_PROGRESS_UNSPECIFIED}
	for _, tc := range []struct {
		name   string
		kind   fsmpb.StepKind
		access fsmpb.ToolAccess
		want   fsmpb.Outcome
	}{
		{"read", kCallTool, fsmpb.ToolAccess_TOOL_ACCESS_READ, oFailed},
		{"idempotent write", kCallTool, fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, oUnknown},
		{"single attempt", kSingle, fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT, oUnknown},
	} {
		st := &fsmpb.Step{Kind: tc.kind, Tool: "t", Policy: &fsmpb.ToolSpec{Name: "t", Access: tc.access},
			Attempts: []*fsmpb.Attempt{{N: 1}, {N: 2}, unspecified}}
		o, text := finalToolOutcome(st, unspecified)
		if o != tc.want || strings.HasPrefix(text, NotRunPrefix) || !strings.Contains(text, "connection reset") {
			t.Errorf("%s with UNSPECIFIED progress records %s %q; want %s, not the not-run prefix",
				tc.name, OutcomeName(o), text, OutcomeName(tc.want))
		}
		st.Attempts[2] = &fsmpb.Attempt{N: 3, Error: "connection reset", Progress: fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_COMPLETED}
		if o2, text2 := finalToolOutcome(st, st.Attempts[2]); o2 != o || text2 != text {
			t.Errorf("%s: UNSPECIFIED records %s %q, NOT_COMPLETED %s %q; want the same", tc.name, OutcomeName(o), text, OutcomeName(o2), text2)
		}
	}
}

func TestProgress_ServerCrashAfterAttemptStartIsNotAFalseUnknown(t *testing.T) {
	// The original system reports NOT_COMPLETED whenever a server crashed
	// after recording the attempt start; the claim makes NOT_STARTED exact.
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "send_email", "{}"), kSingle)
	h := d.start(st)
	d.restart()
	h.expire()
	if st = d.step(st.Id); st.Outcome != oFailed || !strings.HasPrefix(st.Result, NotRunPrefix) {
		t.Fatalf("unclaimed single-attempt call after a restart: %s %q", OutcomeName(st.Outcome), st.Result)
	}
}

func TestWorkerCalls_RepeatOfACommittedCallReturnsTheFirstAnswer(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "save_note", "{}"), kCallTool)
	h := d.start(st)
	claim := h.claimCmd()
	d.do(claim)
	if res := d.try(claim); res.Err != nil || !res.Replayed {
		t.Fatalf("repeated claim: %v replayed=%v", res.Err, res.Replayed)
	}
	done := h.toolResult("saved", false, "")
	d.do(done)
	d.newEpoch() // a takeover between the commit and the answer
	before := d.stateBytes()
	if res := d.try(done); res.Err != nil || !res.Replayed {
		t.Fatalf("Complete repeated on the new leader: %v replayed=%v; want success", res.Err, res.Replayed)
	}
	if string(before) != string(d.stateBytes()) {
		t.Fatal("a replayed call changed the state")
	}
}

func TestWorkerCalls_FromTheFutureOrAReplacedAttemptAreRefused(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "lookup", "{}"), kCallTool)
	old := d.start(st)
	future := &fsmpb.Command{Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{
		Ref: &fsmpb.AttemptRef{StepId: old.st, Attempt: old.n, Token: old.tok, Seq: 5},
	}}}
	d.refused(future, CodeFailedPrecondition)
	old.expire()
	cur := d.startNext("s", kCallTool)
	d.refused(old.toolResult("late", false, ""), CodeFailedPrecondition)
	wrongToken := &fsmpb.Command{Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{
		Ref: &fsmpb.AttemptRef{StepId: cur.st, Attempt: cur.n, Token: "forged", Seq: 1},
	}}}
	d.refused(wrongToken, CodeFailedPrecondition)
	noAttempt := &fsmpb.Command{Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{
		Ref: &fsmpb.AttemptRef{StepId: cur.st, Attempt: 9, Token: cur.tok, Seq: 1},
	}}}
	d.refused(noAttempt, CodeNotFound)
	cur.claim().result("ok")
}

func TestWorkerCalls_ClaimAfterExpiryIsRefused(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "send_email", "{}"), kSingle)
	h := d.start(st)
	h.expire()
	d.refused(h.claimCmd(), CodeFailedPrecondition)
}

func TestEpoch_OldEpochIsRejectedAndChangesNothing(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "lookup", "{}"), kCallTool)
	h := d.start(st)
	oldExpire := h.expireCmd()
	old := d.epoch
	d.newEpoch()
	d.refused(oldExpire, CodeFailedPrecondition)
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: st.Id, Attempt: 2, WorkerId: "w1", Epoch: old}}}, CodeFailedPrecondition)
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_RestartSessions{RestartSessions: &fsmpb.RestartSessions{Epoch: old}}}, CodeFailedPrecondition)
	// The attempt itself survives the takeover: its Worker finishes it.
	h.claim().result("found")
	if d.step(st.Id).Outcome != oSucceeded {
		t.Fatal("an attempt started in the old epoch could not complete")
	}
}

func TestBadInput_ClearRejectionsThatChangeNothing(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "")
	cases := []struct {
		name string
		cmd  *fsmpb.Command
		code Code
	}{
		{"session without id", &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{}}}, CodeInvalid},
		{"duplicate session", &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s"}}}, CodeAlreadyExists},
		{"unknown parent", &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "t", ParentId: "nope"}}}, CodeNotFound},
		{"message to unknown session", &fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "nope", MessageId: "m", Text: "x"}}}, CodeNotFound},
		{"empty message", &fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s", MessageId: "m", Text: ""}}}, CodeInvalid},
		{"unknown step", &fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: "nope", Attempt: 1, WorkerId: "w1", Epoch: d.epoch}}}, CodeNotFound},
		{"tool without policy", &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w2", Tools: []*fsmpb.ToolSpec{{Name: "x"}}}}}, CodeInvalid},
		{"built-in tool name", &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w2", Tools: []*fsmpb.ToolSpec{{Name: "sleep", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ}}}}}, CodeInvalid},
		{"reconcile a succeeded step", nil, CodeFailedPrecondition},
		{"resume an idle session", resume("s"), CodeFailedPrecondition},
		{"answer an unknown step", answerCmd("nope", "x"), CodeNotFound},
		{"bump epoch without node", &fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{}}}, CodeInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := c.cmd
			if cmd == nil {
				d.send("s", "hi")
				h := d.startNext("s", kRunModel)
				h.answer("hello")
				cmd = &fsmpb.Command{Body: &fsmpb.Command_ReconcileOutcome{ReconcileOutcome: &fsmpb.ReconcileOutcome{StepId: h.st, Outcome: oFailed}}}
			}
			d.t = t
			d.refused(cmd, c.code)
		})
	}
}

func TestBadInput_UnknownToolInModelOutputIsARecordedFailedCall(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "go")
	d.startNext("s", kRunModel).answer("", call("c1", "rm_rf", "{}"), call("c2", "lookup", "{}"))
	tr := toolResults(d.session("s"))["c1"]
	if tr == nil || tr.Outcome != oFailed || !strings.Contains(tr.Text, "unknown tool") {
		t.Fatalf("unknown tool result %v", tr)
	}
	d.startNext("s", kCallTool).claim().result("found")
	d.queued("s", kRunModel)
}

func TestBadInput_MalformedModelOutputIsRefused(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "go")
	h := d.startNext("s", kRunModel)
	d.refused(h.output("", call("c1", "lookup", "{}"), call("c1", "lookup", "{}")), CodeInvalid)
	h.seq-- // the refused call did not count
	d.refused(h.toolResult("x", false, ""), CodeInvalid)
}

func TestReconcile_OutcomeUnknownThroughTheAPI(t *testing.T) {
	d := newDriver(t)
	st := toolTurn(t, d, "s", call("c1", "send_email", "{}"), kSingle)
	d.start(st).claim().expire()
	rec := &fsmpb.Command{Body: &fsmpb.Command_ReconcileOutcome{ReconcileOutcome: &fsmpb.ReconcileOutcome{StepId: st.Id, Outcome: oSucceeded, Note: "the mail server logged it"}}}
	d.do(rec)
	if d.step(st.Id).Outcome != oSucceeded {
		t.Fatal("not reconciled")
	}
	d.refused(rec, CodeFailedPrecondition)
	if countKind(d.session("s"), fsmpb.HistoryKind_HISTORY_KIND_NOTE) != 1 {
		t.Fatal("the history does not note the reconciliation")
	}
}

func TestIdempotentMessages_SameIDChangesNothing(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "")
	msg := &fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s", MessageId: "k1", Text: "hi"}}}
	d.do(msg)
	before := d.stateBytes()
	if res := d.do(msg); !res.Replayed {
		t.Fatal("a repeated message id was not recognised")
	}
	if string(before) != string(d.stateBytes()) {
		t.Fatal("a repeated message changed the state")
	}
}
