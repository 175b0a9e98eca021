package fsm

import (
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// The rescue of a paused agent and the rule fixes of the rejected-turn pause
// (docs/model-failures.md), one test per case.

const eUnknown = fsmpb.ErrorType_ERROR_TYPE_UNKNOWN

func resumeWith(session string, choice fsmpb.ResumeChoice) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ResumeSession{ResumeSession: &fsmpb.ResumeSession{SessionId: session, Choice: choice}}}
}

// pausedChild rejects the child's tool-result turn until it pauses.
func pausedChild(t *testing.T, d *driver) {
	t.Helper()
	childWithToolResults(t, d)
	for i := 0; i < RejectedTurnLimit; i++ {
		d.startNext("c", kRunModel).fail(eInvalid, "the tool result is malformed")
		if i < RejectedTurnLimit-1 {
			d.restart()
		}
	}
	wantStatus(t, d.session("c"), sPaused)
}

func historyKinds(s *fsmpb.Session, kind fsmpb.HistoryKind) []*fsmpb.HistoryEntry {
	var out []*fsmpb.HistoryEntry
	for _, e := range s.History {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func TestRescue_DropTurnsTheResultsIntoNotesAndGoesOnWithTheInbox(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	d.send("c", "what next?") // kept while paused
	d.do(resumeWith("c", fsmpb.ResumeChoice_RESUME_CHOICE_DROP))
	c := d.session("c")
	if c.RejectedTurns != 0 || c.TurnsFailed != 1 || c.PauseReason != fsmpb.PauseReason_PAUSE_REASON_UNSPECIFIED {
		t.Fatalf("after the drop: count %d, turns failed %d, pause %s", c.RejectedTurns, c.TurnsFailed, c.PauseReason)
	}
	tr := toolResults(c)["c1"]
	if tr == nil || strings.Contains(tr.Text, "found") || !strings.Contains(tr.Text, "succeeded, but its result was dropped") ||
		!strings.Contains(tr.Text, "the tool result is malformed") || tr.Outcome != oSucceeded {
		t.Fatalf("the dropped result reads %+v", tr)
	}
	if n := len(historyKinds(c, fsmpb.HistoryKind_HISTORY_KIND_TOOL_RESULT)); n != 1 {
		t.Fatalf("%d tool results in the history; want the one note", n)
	}
	for _, e := range historyKinds(c, fsmpb.HistoryKind_HISTORY_KIND_NOTE) {
		if strings.HasPrefix(e.Text, toolsRanNote) {
			t.Fatalf("the do-not-repeat note stayed after the drop: %q", e.Text)
		}
	}
	// The inbox goes on: the waiting message starts the next turn, whose
	// model sees the note and not the rejected result.
	wantStatus(t, c, sRunning)
	d.startNext("c", kRunModel).answer("fine")
	c = d.session("c")
	wantStatus(t, c, sIdle)
	if c.InboxCount != 0 || countEvents(d, "c", "turn_dropped") != 1 {
		t.Fatalf("inbox %d, turn_dropped %d", c.InboxCount, countEvents(d, "c", "turn_dropped"))
	}
	// A lookup ran once and was never asked to run again.
	if n := len(d.stepsOf("c", kCallTool)); n != 1 {
		t.Fatalf("%d lookup Steps; want 1", n)
	}
}

func TestRescue_DropWithAnEmptyInboxGoesIdle(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	models := len(d.stepsOf("c", kRunModel))
	d.do(resumeWith("c", fsmpb.ResumeChoice_RESUME_CHOICE_DROP))
	wantStatus(t, d.session("c"), sIdle)
	if n := len(d.stepsOf("c", kRunModel)); n != models {
		t.Fatalf("a drop with nothing in the inbox called the model: %d → %d", models, n)
	}
	// The next message starts a turn as usual.
	d.send("c", "again")
	d.startNext("c", kRunModel).answer("ok")
	wantStatus(t, d.session("c"), sIdle)
}

func TestRescue_ResumeRefusesBadChoicesAndBusySessions(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	d.refused(resumeWith("c", fsmpb.ResumeChoice(9)), CodeInvalid)
	d.refused(resumeWith("p", fsmpb.ResumeChoice_RESUME_CHOICE_DROP), CodeFailedPrecondition)
	d.refused(resumeWith("nobody", fsmpb.ResumeChoice_RESUME_CHOICE_RETRY), CodeNotFound)
}

// parentCalls makes the parent's model call resume_agent with args, and
// returns the call's recorded result.
func parentCalls(t *testing.T, d *driver, id, args string) *fsmpb.HistoryEntry {
	t.Helper()
	d.startNext("p", kRunModel).answer("", call(id, BuiltinResumeAgent, args))
	return toolResults(d.session("p"))[id]
}

// parentIdle answers whatever the parent was told until it is idle.
func parentIdle(t *testing.T, d *driver) {
	t.Helper()
	for d.session("p").Status == sRunning {
		d.startNext("p", kRunModel).answer("noted")
	}
}

func TestRescue_ParentResumesItsChildByRetry(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	parentIdle(t, d)
	d.send("p", "rescue your child")
	tr := parentCalls(t, d, "r1", `{"agent": "c", "choice": "retry"}`)
	if tr == nil || tr.Outcome != oSucceeded || !strings.Contains(tr.Text, `agent "c" resumed (retry)`) {
		t.Fatalf("resume_agent answered %+v", tr)
	}
	wantStatus(t, d.session("c"), sRunning)
	d.startNext("c", kRunModel).answer("done at last")
	c := d.session("c")
	wantStatus(t, c, sIdle)
	if c.RejectedTurns != 0 {
		t.Fatalf("count %d after an answer", c.RejectedTurns)
	}
	// The parent's own turn went on with the built-in's result.
	d.startNext("p", kRunModel).answer("my child is back")
	if countEvents(d, "c", "session_resumed") < 1 {
		t.Fatal("no session_resumed event on the child")
	}
}

func TestRescue_ParentResumesItsChildByDrop(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	parentIdle(t, d)
	d.send("p", "rescue your child")
	tr := parentCalls(t, d, "r1", `{"agent": "c", "choice": "drop"}`)
	if tr == nil || tr.Outcome != oSucceeded || !strings.Contains(tr.Text, "resumed (drop); it is idle now") {
		t.Fatalf("resume_agent answered %+v", tr)
	}
	c := d.session("c")
	if c.RejectedTurns != 0 || toolResults(c)["c1"].Outcome != oSucceeded || !strings.Contains(toolResults(c)["c1"].Text, "dropped") {
		t.Fatalf("child after the drop: count %d, result %+v", c.RejectedTurns, toolResults(c)["c1"])
	}
}

func TestRescue_ResumeAgentRefusesWhatIsNotItsPausedChild(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	d.createSession("stranger", "", "")
	parentIdle(t, d)
	cases := []struct{ args, want string }{
		{`{"agent": "stranger"}`, `agent "stranger" is not a sub-agent of this session`},
		{`{"agent": "nobody"}`, `agent "nobody" is not a sub-agent of this session`},
		{`{"agent": "c", "choice": "later"}`, `choice must be "retry" or "drop"`},
		{`not json`, `arguments must be {"agent": ID`},
		{`{}`, `arguments must be {"agent": ID`},
	}
	for i, tc := range cases {
		d.send("p", "try")
		tr := parentCalls(t, d, "bad"+string(rune('a'+i)), tc.args)
		if tr == nil || tr.Outcome != oFailed || !strings.Contains(tr.Text, tc.want) {
			t.Fatalf("%s: answered %+v; want failed with %q", tc.args, tr, tc.want)
		}
		parentIdle(t, d)
	}
	wantStatus(t, d.session("c"), sPaused)
	// A child that is not paused or errored is not resumed.
	d.do(resumeWith("c", fsmpb.ResumeChoice_RESUME_CHOICE_DROP))
	d.send("p", "try again")
	tr := parentCalls(t, d, "idle", `{"agent": "c"}`)
	if tr.Outcome != oFailed || !strings.Contains(tr.Text, `agent "c" is idle: only a paused or errored agent can be resumed`) {
		t.Fatalf("resuming an idle child answered %+v", tr)
	}
}

// The child's resume fails at once (its input is over its limit): what it
// tells its parent reaches the parent the built-in is running in.
func TestRescue_ResumeAgentWhoseChildFailsAtOnceTellsTheParentInHand(t *testing.T) {
	d := newDriver(t)
	d.createSession("p", "", "")
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: "c", ParentId: "p", MessageId: "c-m0", Message: "work", MaxModelInput: 1024,
	}}})
	d.startNext("c", kRunModel).answer("", call("c1", "lookup", "{}"))
	d.startNext("c", kCallTool).claim().result("found")
	for range RejectedTurnLimit {
		d.startNext("c", kRunModel).fail(eInvalid, "no")
		if d.session("c").Status == sErrored {
			d.do(resume("c"))
		}
	}
	wantStatus(t, d.session("c"), sPaused)
	parentIdle(t, d)
	d.send("p", "rescue")
	// An edit that leaves the history over the child's model-input limit.
	d.do(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: "c", Note: strings.Repeat("x", 4096)}}})
	before := parentMessages(d, "p", "agent encountered an error")
	tr := parentCalls(t, d, "r1", `{"agent": "c"}`)
	if tr.Outcome != oSucceeded || !strings.Contains(tr.Text, "it is errored now") {
		t.Fatalf("resume_agent answered %+v", tr)
	}
	if n := parentMessages(d, "p", "agent encountered an error"); n != before+1 {
		t.Fatalf("the parent got %d error messages; want %d", n, before+1)
	}
	p := d.session("p")
	if p.InboxCount != uint32(len(p.Inbox)) || p.InboxCount != 1 {
		t.Fatalf("the parent's inbox count %d, %d messages; want 1", p.InboxCount, len(p.Inbox))
	}
}

func TestRule2_APollWhoseAttemptsAllExpireUnclaimedIsNeverReportedNotRun(t *testing.T) {
	d := newDriver(t)
	longRunning(t, d) // build: an idempotent write
	for {
		st := d.queued("s", kPoll)
		d.start(st).expire() // never claimed
		if d.step(st.Id).Status == fsmpb.StepStatus_STEP_STATUS_DONE {
			break
		}
	}
	tr := toolResults(d.session("s"))["c1"]
	if tr == nil || strings.HasPrefix(tr.Text, NotRunPrefix) || tr.Outcome != oUnknown || !strings.Contains(tr.Text, "task task-42 was started") {
		t.Fatalf("the call recorded %+v", tr)
	}
	if n := len(d.stepsOf("s", kCallTool)); n != 1 {
		t.Fatalf("a second task started: %d start Steps", n)
	}
}

func TestRule3_AMessageRetriesTheKeptTurnAndCountsTowardThePause(t *testing.T) {
	d := newDriver(t)
	childWithToolResults(t, d)
	d.startNext("c", kRunModel).fail(eInvalid, "rejected")
	for i := 2; i <= 4; i++ {
		d.send("c", "are you there?")
		if i == 4 {
			break
		}
		d.startNext("c", kRunModel).fail(eInvalid, "rejected")
	}
	c := d.session("c")
	wantStatus(t, c, sPaused)
	if c.RejectedTurns != RejectedTurnLimit || len(d.stepsOf("c", kRunModel)) != 1+RejectedTurnLimit {
		t.Fatalf("count %d, %d model calls", c.RejectedTurns, len(d.stepsOf("c", kRunModel)))
	}
	if n := parentMessages(d, "p", "agent encountered an error"); n != 2 {
		t.Fatalf("parent got %d error messages; want 2", n)
	}
	if n := parentMessages(d, "p", `<child-paused agent="c">`); n != 1 {
		t.Fatalf("parent got %d child-paused; want 1", n)
	}
	if c.InboxCount != 3 {
		t.Fatalf("%d messages wait in the inbox; want 3", c.InboxCount)
	}
	// The kept turn's own history was not replaced by the messages.
	if tr := toolResults(c)["c1"]; tr == nil || tr.Text != "found" {
		t.Fatalf("the kept result is %+v", tr)
	}
}

func TestRule4_ARestartOpensANewErrorEpisode(t *testing.T) {
	d := newDriver(t)
	childWithToolResults(t, d)
	for range ModelMaxAttempts {
		d.startNext("c", kRunModel).fail(eServer, "outage")
	}
	wantStatus(t, d.session("c"), sErrored)
	if n := parentMessages(d, "p", "agent encountered an error"); n != 1 {
		t.Fatalf("parent got %d error messages; want 1", n)
	}
	d.restart()
	for range ModelMaxAttempts {
		d.startNext("c", kRunModel).fail(eServer, "still down")
	}
	wantStatus(t, d.session("c"), sErrored)
	if n := parentMessages(d, "p", "agent encountered an error"); n != 2 {
		t.Fatalf("after the restart the parent got %d error messages; want 2 (a new episode)", n)
	}
}

func TestRule5_AnUnknownErrorIsRetriedInItsStepThenCountsAndPauses(t *testing.T) {
	d := newDriver(t)
	childWithToolResults(t, d)
	for turn := 1; turn <= RejectedTurnLimit; turn++ {
		for range ModelMaxAttempts {
			d.startNext("c", kRunModel).fail(eUnknown, "HTTP 400 from the provider")
		}
		c := d.session("c")
		if c.RejectedTurns != uint32(turn) || c.ResumeAtMs != 0 {
			t.Fatalf("turn %d: count %d, resume at %d", turn, c.RejectedTurns, c.ResumeAtMs)
		}
		if turn < RejectedTurnLimit {
			wantStatus(t, c, sErrored)
			d.do(resume("c"))
		}
	}
	c := d.session("c")
	wantStatus(t, c, sPaused)
	if !strings.Contains(c.PauseMessage, "Last error: unknown: HTTP 400 from the provider") {
		t.Fatalf("pause message %q", c.PauseMessage)
	}
	// One do-not-repeat note for the turn, however often it failed.
	notes := 0
	for _, e := range historyKinds(c, fsmpb.HistoryKind_HISTORY_KIND_NOTE) {
		if strings.HasPrefix(e.Text, toolsRanNote) {
			notes++
		}
	}
	if notes != 1 {
		t.Fatalf("%d do-not-repeat notes; want 1", notes)
	}
}

func TestRule5_AnUnknownErrorOnMessagesConsumesThem(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hi")
	for range ModelMaxAttempts {
		d.startNext("s", kRunModel).fail(eUnknown, "boom")
	}
	s := d.session("s")
	wantStatus(t, s, sErrored)
	if s.Turn != nil || s.ResumeAtMs != 0 || s.TurnsFailed != 1 {
		t.Fatalf("kept turn %v, resume at %d, turns failed %d", s.Turn != nil, s.ResumeAtMs, s.TurnsFailed)
	}
}

func TestRule6_ThePauseAfterAResumeSaysSoAndThePauseIsOneEvent(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	evs := d.f.State().Events("c", 0)
	last := evs[len(evs)-1]
	if last.Type != "session_paused" {
		t.Fatalf("the pause's last event is %s", last.Type)
	}
	if evs[len(evs)-2].Type == "session_errored" {
		t.Fatal("the pause also sent session_errored")
	}
	d.do(resume("c"))
	d.startNext("c", kRunModel).fail(eInvalid, "still malformed")
	c := d.session("c")
	wantStatus(t, c, sPaused)
	if strings.Contains(c.PauseMessage, "4 times") || !strings.HasPrefix(c.PauseMessage, "The provider rejected this turn again after it was resumed") {
		t.Fatalf("pause message after the resume: %q", c.PauseMessage)
	}
	if countEvents(d, "c", "session_paused") != 2 {
		t.Fatalf("%d session_paused events; want 2", countEvents(d, "c", "session_paused"))
	}
}

func TestRule6_ARootSessionPausesToo(t *testing.T) {
	d := newDriver(t)
	toolTurn(t, d, "root", call("c1", "lookup", "{}"), kCallTool)
	d.startNext("root", kCallTool).claim().result("found")
	for range RejectedTurnLimit {
		d.startNext("root", kRunModel).fail(eInvalid, "no")
		if d.session("root").Status == sErrored {
			d.do(resume("root"))
		}
	}
	s := d.session("root")
	wantStatus(t, s, sPaused)
	if countEvents(d, "root", "session_paused") != 1 || s.PauseReason != fsmpb.PauseReason_PAUSE_REASON_LIMIT {
		t.Fatalf("%d session_paused events, reason %s", countEvents(d, "root", "session_paused"), s.PauseReason)
	}
}

func TestEditHistory_RefusesASeqPastTheEnd(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	next := d.session("c").NextHistory
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: "c", TruncateFromSeq: next}}}, CodeInvalid)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: "c", TruncateFromSeq: next - 1}}})
	if c := d.session("c"); c.RejectedTurns != 0 || c.NextHistory != next {
		t.Fatalf("count %d, next history %d", c.RejectedTurns, c.NextHistory)
	}
}

// CancelSession (CancelTurn) is a way out of the pause too: the kept turn
// ends with no Step to stop, the pause and the count clear, and the session
// is idle. Unlike a drop it rewrites nothing: the rejected turn's tool
// results and the do-not-repeat note stay as they were, a cancel note
// follows them, no turn counts as failed, and the parent is told nothing.
// Messages kept while paused stay in the inbox until the next one comes.
func TestRescue_CancelEndsThePauseAndKeepsTheHistoryAsItWas(t *testing.T) {
	d := newDriver(t)
	pausedChild(t, d)
	d.send("c", "what next?") // kept while paused
	before := d.session("c")
	parent := len(d.session("p").History) + int(d.session("p").InboxCount)
	models := len(d.stepsOf("c", kRunModel))

	res := d.do(cancelCmd("c", "ops", "stop retrying"))
	if res.StepsCancelled != 0 || res.AttemptsCancelled != 0 {
		t.Fatalf("the cancel stopped %d Steps, %d attempts; a paused session runs none", res.StepsCancelled, res.AttemptsCancelled)
	}
	c := d.session("c")
	wantStatus(t, c, sIdle)
	if c.Turn != nil || c.RejectedTurns != 0 || c.PauseReason != fsmpb.PauseReason_PAUSE_REASON_UNSPECIFIED || c.PauseMessage != "" {
		t.Fatalf("after the cancel: turn %v, count %d, pause %s %q", c.Turn, c.RejectedTurns, c.PauseReason, c.PauseMessage)
	}
	if c.TurnsFailed != before.TurnsFailed || c.LastError != before.LastError || c.InboxCount != 1 {
		t.Fatalf("turns failed %d → %d, last error %q → %q, inbox %d; want unchanged and the waiting message kept",
			before.TurnsFailed, c.TurnsFailed, before.LastError, c.LastError, c.InboxCount)
	}
	if len(c.History) != len(before.History)+1 {
		t.Fatalf("history %d → %d entries; want the same plus the cancel note", len(before.History), len(c.History))
	}
	for i, e := range before.History {
		if got := c.History[i]; got.Kind != e.Kind || got.Text != e.Text || got.Outcome != e.Outcome {
			t.Fatalf("history entry %d changed: %v → %v", i, e, got)
		}
	}
	if tr := toolResults(c)["c1"]; tr == nil || tr.Text != "found" || tr.Outcome != oSucceeded {
		t.Fatalf("the rejected turn's tool result reads %+v; want it kept as it was", tr)
	}
	if last := c.History[len(c.History)-1]; last.Kind != fsmpb.HistoryKind_HISTORY_KIND_NOTE || last.Text != "The previous turn was cancelled by ops: stop retrying" {
		t.Fatalf("last history entry %v; want the cancel note", last)
	}
	if n := len(d.session("p").History) + int(d.session("p").InboxCount); n != parent {
		t.Fatalf("the parent got %d messages from the cancel; want none", n-parent)
	}
	if countEvents(d, "c", "turn_cancelled") != 1 || len(d.stepsOf("c", kRunModel)) != models {
		t.Fatal("the cancel did not end the turn once, or called the model")
	}
	d.refused(resumeWith("c", fsmpb.ResumeChoice_RESUME_CHOICE_RETRY), CodeFailedPrecondition) // nothing left to resume

	// The next message starts a turn with both waiting messages.
	d.send("c", "hello again")
	wantStatus(t, d.session("c"), sRunning)
	d.startNext("c", kRunModel).answer("hi")
	if c = d.session("c"); c.Status != sIdle || c.InboxCount != 0 {
		t.Fatalf("after the next turn: %s, inbox %d", StatusName(c.Status), c.InboxCount)
	}
}
