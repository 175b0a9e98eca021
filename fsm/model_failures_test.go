package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// docs/model-failures.md: model failures, error-resume episodes and the rejected-turn pause.

const (
	eInvalid  = fsmpb.ErrorType_ERROR_TYPE_INVALID_REQUEST
	eContext  = fsmpb.ErrorType_ERROR_TYPE_CONTEXT_LENGTH
	eServer   = fsmpb.ErrorType_ERROR_TYPE_SERVER_ERROR
	eRate     = fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT
	eNoneType = fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED
)

// parentMessages counts the parent's received messages that contain text.
func parentMessages(d *driver, parent, text string) int {
	n := 0
	s := d.session(parent)
	for _, e := range s.History {
		if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_USER && strings.Contains(e.Text, text) {
			n++
		}
	}
	for _, m := range s.Inbox {
		if strings.Contains(m.Text, text) {
			n++
		}
	}
	return n
}

// childWithToolResults makes a child of "p" whose turn ran a tool, so its next
// RunModel is a tool-result turn.
func childWithToolResults(t *testing.T, d *driver) {
	t.Helper()
	d.createSession("p", "", "")
	d.createSession("c", "p", "work")
	d.startNext("c", kRunModel).answer("", call("c1", "lookup", "{}"))
	d.startNext("c", kCallTool).claim().result("found")
}

func TestModel_RetryableFailureRunsAnotherAttemptWithBackoff(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hi")
	d.startNext("s", kRunModel).fail(eRate, "slow down")
	st := d.queued("s", kRunModel)
	if st.ReadyAtMs <= d.now {
		t.Fatal("no backoff before the next attempt")
	}
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: st.Id, Attempt: 2, WorkerId: "w1", Epoch: d.epoch}}}, CodeFailedPrecondition)
	d.start(st).answer("hello")
	wantStatus(t, d.session("s"), sIdle)
}

func TestModel_RetryableExhaustedIsErroredWithInputKeptAndOneParentMessagePerEpisode(t *testing.T) {
	d := newDriver(t)
	d.createSession("p", "", "")
	d.createSession("c", "p", "work")
	for range 3 {
		d.startNext("c", kRunModel).fail(eServer, "500")
	}
	c := d.session("c")
	wantStatus(t, c, sErrored)
	if c.Turn == nil || c.ResumeAtMs == 0 {
		t.Fatal("input not kept or no error-resume scheduled")
	}
	if n := parentMessages(d, "p", "agent encountered an error"); n != 1 {
		t.Fatalf("parent got %d error messages; want 1", n)
	}
	// The episode: the cluster resumes it, it fails again: no second message.
	d.now = c.ResumeAtMs
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ResumeErrored{ResumeErrored: &fsmpb.ResumeErrored{SessionId: "c", Epoch: d.epoch}}})
	for range 3 {
		d.startNext("c", kRunModel).fail(eServer, "500")
	}
	c2 := d.session("c")
	if c2.ResumeAtMs-d.now <= c.ResumeAtMs-c.UpdatedAtMs {
		t.Fatalf("the error-resume backoff did not grow: %d then %d", c.ResumeAtMs-c.UpdatedAtMs, c2.ResumeAtMs-d.now)
	}
	if n := parentMessages(d, "p", "agent encountered an error"); n != 1 {
		t.Fatalf("parent got %d error messages in one episode; want 1", n)
	}
	// A resume that succeeds ends the episode.
	d.now = c2.ResumeAtMs
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ResumeErrored{ResumeErrored: &fsmpb.ResumeErrored{SessionId: "c", Epoch: d.epoch}}})
	d.startNext("c", kRunModel).answer("done")
	wantStatus(t, d.session("c"), sIdle)
}

func TestModel_ResumeBeforeItIsDueIsRefused(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hi")
	for range 3 {
		d.startNext("s", kRunModel).fail(eServer, "500")
	}
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_ResumeErrored{ResumeErrored: &fsmpb.ResumeErrored{SessionId: "s", Epoch: d.epoch}}}, CodeFailedPrecondition)
}

func TestModel_NonRetryableOnMessagesConsumesThem(t *testing.T) {
	d := newDriver(t)
	d.createSession("p", "", "")
	d.createSession("c", "p", "bad request")
	d.startNext("c", kRunModel).fail(eContext, "too long")
	c := d.session("c")
	wantStatus(t, c, sErrored)
	if c.Turn != nil || c.RejectedTurns != 0 {
		t.Fatalf("messages not consumed (turn %v) or counted (%d)", c.Turn, c.RejectedTurns)
	}
	if len(d.stepsOf("c", kRunModel)[0].Attempts) != 1 {
		t.Fatal("a non-retryable failure ran another attempt")
	}
	if n := parentMessages(d, "p", "agent encountered an error"); n != 1 {
		t.Fatalf("parent got %d error messages; want 1", n)
	}
	d.send("c", "next")
	d.startNext("c", kRunModel).answer("ok")
	wantStatus(t, d.session("c"), sIdle)
}

func TestModel_ThreeRejectedMessagesThenAValidOneIsAnsweredNeverPaused(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "")
	for range 3 {
		d.send("s", "rejected")
		d.startNext("s", kRunModel).fail(eInvalid, "bad")
		wantStatus(t, d.session("s"), sErrored)
	}
	d.send("s", "fine")
	d.startNext("s", kRunModel).answer("answered")
	s := d.session("s")
	wantStatus(t, s, sIdle)
	if s.RejectedTurns != 0 || s.PauseReason != fsmpb.PauseReason_PAUSE_REASON_UNSPECIFIED {
		t.Fatalf("rejected messages counted: %d", s.RejectedTurns)
	}
}

func TestModel_RejectedToolResultTurnPausesOnTheThirdAcrossRestarts(t *testing.T) {
	d := newDriver(t)
	childWithToolResults(t, d)
	d.startNext("c", kRunModel).fail(eInvalid, "tool result rejected")
	if c := d.session("c"); c.RejectedTurns != 1 || c.Status != sErrored {
		t.Fatalf("after 1 rejection: count %d, %s", c.RejectedTurns, StatusName(c.Status))
	}
	d.restart() // session_restarted: retried once
	if countEvents(d, "c", "session_restarted") != 1 {
		t.Fatal("no session_restarted event")
	}
	d.startNext("c", kRunModel).fail(eInvalid, "tool result rejected")
	d.restart()
	d.startNext("c", kRunModel).fail(eInvalid, "tool result rejected")
	c := d.session("c")
	wantStatus(t, c, sPaused)
	if c.PauseReason != fsmpb.PauseReason_PAUSE_REASON_LIMIT || !strings.HasPrefix(c.PauseMessage, "The provider rejected this turn 3 times in a row and the agent will not retry it on its own. Last error: ") {
		t.Fatalf("pause %s %q", c.PauseReason, c.PauseMessage)
	}
	d.restart() // a paused session is left alone
	if n := len(d.stepsOf("c", kRunModel)); n != 4 {
		t.Fatalf("%d model calls; want exactly 4 (1 output + 3 rejected)", n)
	}
	if n := parentMessages(d, "p", "agent encountered an error"); n != 2 {
		t.Fatalf("parent got %d error messages; want 2", n)
	}
	if n := parentMessages(d, "p", `<child-paused agent="c">`); n != 1 {
		t.Fatalf("parent got %d child-paused; want 1", n)
	}
	// Paused: new input is kept, not started.
	d.send("c", "are you there?")
	if len(d.stepsOf("c", kRunModel)) != 4 {
		t.Fatal("a paused session started a turn")
	}
	// Resume: one more try, rejected again: paused again, one more message.
	d.do(resume("c"))
	d.startNext("c", kRunModel).fail(eInvalid, "tool result rejected")
	wantStatus(t, d.session("c"), sPaused)
	if n := parentMessages(d, "p", `<child-paused agent="c">`); n != 2 {
		t.Fatalf("parent got %d child-paused after the resume; want 2", n)
	}
	if n := parentMessages(d, "p", "agent encountered an error"); n != 2 {
		t.Fatalf("parent got %d error messages; want still 2", n)
	}
	// Resume, then an outage: errored, not paused; the next restart recovers.
	d.do(resume("c"))
	for range 3 {
		d.startNext("c", kRunModel).fail(eServer, "outage")
	}
	wantStatus(t, d.session("c"), sErrored)
	d.restart()
	d.startNext("c", kRunModel).answer("recovered")
	c = d.session("c")
	if c.RejectedTurns != 0 {
		t.Fatalf("a committed output did not clear the count: %d", c.RejectedTurns)
	}
	// The message that waited in the inbox is answered next.
	d.startNext("c", kRunModel).answer("yes")
	wantStatus(t, d.session("c"), sIdle)
}

func TestModel_CountIgnoresRetryableAndUntypedFailures(t *testing.T) {
	d := newDriver(t)
	childWithToolResults(t, d)
	d.startNext("c", kRunModel).fail(eServer, "500")
	d.startNext("c", kRunModel).fail(eNoneType, "crash")
	d.startNext("c", kRunModel).expire()
	if c := d.session("c"); c.RejectedTurns != 0 {
		t.Fatalf("retryable and untyped failures counted: %d", c.RejectedTurns)
	}
}

func TestModel_RestartSessionsRetriesErroredOnceWithFreshBackoffAndKeepsCount(t *testing.T) {
	d := newDriver(t)
	childWithToolResults(t, d)
	d.startNext("c", kRunModel).fail(eInvalid, "no")
	d.createSession("x", "", "consumed")
	d.startNext("x", kRunModel).fail(eInvalid, "no") // input consumed: left alone
	d.restart()
	c := d.session("c")
	wantStatus(t, c, sRunning)
	if c.RejectedTurns != 1 || c.EpisodeResumes != 0 {
		t.Fatalf("count %d (want kept at 1), resumes %d (want 0)", c.RejectedTurns, c.EpisodeResumes)
	}
	wantStatus(t, d.session("x"), sErrored)
	if len(d.stepsOf("x", kRunModel)) != 1 {
		t.Fatal("a session whose input was consumed was retried")
	}
}

// A child whose retry fails at once tells its errored parent, and that
// message already retries the parent's kept turn: the restart must not queue
// a second RunModel for the same turn.
func TestModel_RestartRetriesAParentOnceWhenItsChildFailsAtOnce(t *testing.T) {
	d := newDriver(t)
	d.createSession("p", "", "")
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: "c", ParentId: "p", MessageId: "c-m0", Message: "work", MaxModelInput: 1024,
	}}})
	d.startNext("c", kRunModel).answer("", call("c1", "lookup", "{}"))
	// A result over the child's limit: its tool-result turn fails at once
	// and is kept, and the parent starts a turn on the error message.
	d.startNext("c", kCallTool).claim().result(strings.Repeat("x", 2048))
	wantStatus(t, d.session("c"), sErrored)
	for range 3 {
		d.startNext("p", kRunModel).fail(eServer, "500")
	}
	p := d.session("p")
	wantStatus(t, p, sErrored)
	if p.Turn == nil {
		t.Fatal("the parent's turn was not kept")
	}

	d.restart()
	var queued []*fsmpb.Step
	for _, st := range d.stepsOf("p", kRunModel) {
		if st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
			queued = append(queued, st)
		}
	}
	if len(queued) != 1 {
		t.Errorf("%d RunModel Steps queued for the parent; want 1", len(queued))
	}
	if n := countEvents(d, "p", "session_restarted"); n != 1 {
		t.Errorf("%d session_restarted events for the parent; want 1", n)
	}
	for _, st := range queued {
		d.start(st).answer("retried")
	}
	n := 0
	for _, e := range d.session("p").History {
		if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_ASSISTANT && e.Text == "retried" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the parent's history has %d outputs of its kept turn; want 1", n)
	}
}

func TestModel_HistoryEditClearsTheCount(t *testing.T) {
	d := newDriver(t)
	childWithToolResults(t, d)
	d.startNext("c", kRunModel).fail(eInvalid, "no")
	d.restart()
	d.startNext("c", kRunModel).fail(eInvalid, "no")
	if c := d.session("c"); c.RejectedTurns != 2 {
		t.Fatalf("count %d; want 2", c.RejectedTurns)
	}
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: "c"}}}, CodeInvalid)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: "c", Note: "the lookup result was too large; it was trimmed"}}})
	if c := d.session("c"); c.RejectedTurns != 0 {
		t.Fatalf("an operator's edit did not clear the count: %d", c.RejectedTurns)
	}
	// Two more rejections do not pause: the count started again.
	d.do(resume("c"))
	d.startNext("c", kRunModel).fail(eInvalid, "no")
	d.do(resume("c"))
	d.startNext("c", kRunModel).fail(eInvalid, "no")
	wantStatus(t, d.session("c"), sErrored)
}

func TestModel_RetryableAfterResumeDoesNotPause(t *testing.T) {
	d := newDriver(t)
	childWithToolResults(t, d)
	for range 3 {
		d.startNext("c", kRunModel).fail(eInvalid, "no")
		if d.session("c").Status == sErrored {
			d.do(resume("c"))
		}
	}
	wantStatus(t, d.session("c"), sPaused)
	d.do(resume("c"))
	d.startNext("c", kRunModel).fail(eRate, "later")
	wantStatus(t, d.session("c"), sRunning) // retried, not paused
	d.advance(time.Minute)
	d.startNext("c", kRunModel).answer("ok")
}
