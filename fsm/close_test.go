package fsm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

const sClosed = fsmpb.SessionStatus_SESSION_STATUS_CLOSED

func closeCmd(id string, retention time.Duration) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{SessionId: id, RetentionMs: retention.Milliseconds()}}}
}

func (d *driver) expireClosedCmd(ids ...string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ExpireClosedSessions{ExpireClosedSessions: &fsmpb.ExpireClosedSessions{Epoch: d.epoch, SessionIds: ids}}}
}

func sendCmd(session, id, text string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: session, MessageId: id, Text: text}}}
}

func eventTypes(d *driver, id string) string {
	var out []string
	for _, e := range d.f.State().Events(id, 0) {
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}

func TestCloseSession_IdleIsClosedAtOnceRefusesMessagesAndStaysReadable(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	d.startNext("s", kRunModel).answer("hi")
	d.do(sendCmd("s", "before", "kept"))
	d.startNext("s", kRunModel).answer("ok")
	at := d.now
	d.do(closeCmd("s", time.Hour))
	s := d.session("s")
	wantStatus(t, s, sClosed)
	if s.ClosedAtMs != at || s.CloseRequestedAtMs != at || s.DeleteAtMs != at+time.Hour.Milliseconds() || s.GetRetentionMs() != time.Hour.Milliseconds() {
		t.Fatalf("closed at %d (asked %d), delete at %d, retention %d", s.ClosedAtMs, s.CloseRequestedAtMs, s.DeleteAtMs, s.GetRetentionMs())
	}
	if len(s.History) != 4 || s.TurnsCompleted != 2 {
		t.Fatalf("a closed session reads %d history entries, %d turns; want its 4 and 2", len(s.History), s.TurnsCompleted)
	}
	if !strings.HasSuffix(eventTypes(d, "s"), "turn_completed session_closed") {
		t.Fatalf("events %s", eventTypes(d, "s"))
	}

	r := d.refused(sendCmd("s", "after", "more"), CodeFailedPrecondition)
	if r.Reason != "session s is closed: it takes no more messages" {
		t.Fatalf("reason %q", r.Reason)
	}
	// A message delivered before the close is still a duplicate, not refused.
	if res := d.do(sendCmd("s", "before", "kept")); !res.Replayed {
		t.Fatal("a repeat of a message delivered before the close was not answered as a duplicate")
	}
	// A second close changes nothing, whatever its retention.
	before := d.stateBytes()
	d.advance(time.Minute)
	d.do(closeCmd("s", 5*time.Hour))
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("a second close changed the state")
	}
}

func TestCloseSession_WhileATurnRunsClosesWhenTheTurnEnds(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "go")
	h := d.startNext("s", kRunModel)
	d.do(sendCmd("s", "queued", "waits for the next turn"))
	d.advance(time.Second)
	asked := d.now
	d.do(closeCmd("s", time.Minute))
	s := d.session("s")
	wantStatus(t, s, sRunning)
	if s.CloseRequestedAtMs != asked || s.ClosedAtMs != 0 || s.DeleteAtMs != 0 {
		t.Fatalf("closing: asked %d, closed %d, delete at %d", s.CloseRequestedAtMs, s.ClosedAtMs, s.DeleteAtMs)
	}
	r := d.refused(sendCmd("s", "late", "too late"), CodeFailedPrecondition)
	if !strings.Contains(r.Reason, "session s is closing (its turn ends, then it is closed): it takes no more messages") {
		t.Fatalf("reason %q", r.Reason)
	}
	if r := d.refused(deleteCmd("s"), CodeFailedPrecondition); !strings.Contains(r.Reason, "is running") {
		t.Fatalf("a closing session's delete: %q", r.Reason)
	}
	d.do(closeCmd("s", time.Hour)) // asked again: nothing changes

	// The turn goes on to its end; the message in the inbox starts no turn.
	d.advance(time.Second)
	h.answer("done")
	s = d.session("s")
	wantStatus(t, s, sClosed)
	if s.ClosedAtMs != d.now || s.DeleteAtMs != d.now+time.Minute.Milliseconds() {
		t.Fatalf("closed at %d, delete at %d; want %d and a minute later", s.ClosedAtMs, s.DeleteAtMs, d.now)
	}
	if s.InboxCount != 1 || s.TurnsCompleted != 1 || len(d.stepsOf("s", kRunModel)) != 1 {
		t.Fatalf("inbox %d, turns %d, model Steps %d: the close let another turn start", s.InboxCount, s.TurnsCompleted, len(d.stepsOf("s", kRunModel)))
	}
	if !strings.Contains(eventTypes(d, "s"), "close_requested") {
		t.Fatalf("events %s", eventTypes(d, "s"))
	}
}

// However the turn ends — a failure, a tool wait cancelled — the closing
// session is closed in the same command, and nothing resumes it.
func TestCloseSession_AFailedOrCancelledTurnClosesTooAndNothingResumesIt(t *testing.T) {
	d := newDriver(t)
	d.createSession("fails", "", "go")
	d.do(closeCmd("fails", 0))
	for range 3 {
		d.startNext("fails", kRunModel).fail(fsmpb.ErrorType_ERROR_TYPE_SERVER_ERROR, "down")
	}
	s := d.session("fails")
	wantStatus(t, s, sClosed)
	if s.ResumeAtMs != 0 || s.DeleteAtMs != 0 {
		t.Fatalf("a closed session keeps resume at %d, delete at %d (retention 0: kept for ever)", s.ResumeAtMs, s.DeleteAtMs)
	}
	d.restart() // a new leader retries errored sessions, not closed ones
	wantStatus(t, d.session("fails"), sClosed)
	if r := d.refused(resume("fails"), CodeFailedPrecondition); !strings.Contains(r.Reason, "is closed") {
		t.Fatalf("resume of a closed session: %q", r.Reason)
	}

	toolTurn(t, d, "waits", call("q", "ask_user", `{"question":"?"}`), kQuestion)
	d.do(closeCmd("waits", time.Hour))
	wantStatus(t, d.session("waits"), sWaiting)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{SessionId: "waits"}}})
	wantStatus(t, d.session("waits"), sClosed)
	if r := d.refused(&fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{SessionId: "fails"}}}, CodeFailedPrecondition); !strings.Contains(r.Reason, "is closed") {
		t.Fatalf("cancel of a closed session: %q", r.Reason)
	}
	if r := d.refused(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: "fails", Note: "n"}}}, CodeFailedPrecondition); !strings.Contains(r.Reason, "is closed") {
		t.Fatalf("edit of a closed session: %q", r.Reason)
	}
}

func TestCloseSession_BadInputIsRefusedAndChangesNothing(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "")
	for _, tc := range []struct {
		cmd  *fsmpb.Command
		code Code
		want string
	}{
		{closeCmd("", time.Hour), CodeInvalid, "session id is required"},
		{closeCmd("nobody", time.Hour), CodeNotFound, `session "nobody" not found`},
		{closeCmd("s", -time.Second), CodeInvalid, "retention_ms must not be negative (0: kept for ever), got -1000 ms"},
		{closeCmd("s", 200*365*24*time.Hour), CodeInvalid, "retention_ms is at most"},
	} {
		if r := d.refused(tc.cmd, tc.code); !strings.Contains(r.Reason, tc.want) {
			t.Errorf("reason %q; want %q", r.Reason, tc.want)
		}
	}
	d.do(deleteCmd("s"))
	if r := d.refused(closeCmd("s", 0), CodeNotFound); !strings.Contains(r.Reason, "not found") {
		t.Fatalf("close of a deleted session: %q", r.Reason)
	}
}

func TestCloseSession_ChildrenAndParents(t *testing.T) {
	d := newDriver(t)
	d.createSession("p", "", "")
	d.createSession("c", "p", "")
	d.do(closeCmd("p", 0))
	create := &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "c2", ParentId: "p"}}}
	if r := d.refused(create, CodeFailedPrecondition); r.Reason != "parent session p is closed: it takes no more children" {
		t.Fatalf("a child of a closed parent: %q", r.Reason)
	}
	// A child that ends tells nobody: a closed parent takes no message.
	d.do(deleteCmd("c"))
	if p := d.session("p"); p.InboxCount != 0 || p.Status != sClosed {
		t.Fatalf("the closed parent got a message: inbox %d, %s", p.InboxCount, StatusName(p.Status))
	}
}

func createWithRetention(id string, ms *int64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id, RetentionMs: ms}}}
}

// A session's own retention, given at creation, beats the one the close
// carries (the cluster's for its agent); 0 keeps it for ever.
func TestRetention_ASessionsOwnRetentionWinsAndANegativeOneIsRefused(t *testing.T) {
	d := newDriver(t)
	d.do(createWithRetention("own", proto.Int64(time.Minute.Milliseconds())))
	d.do(createWithRetention("forever", proto.Int64(0)))
	d.do(createWithRetention("default", nil))
	if r := d.refused(createWithRetention("bad", proto.Int64(-1)), CodeInvalid); !strings.Contains(r.Reason, "retention_ms must not be negative") {
		t.Fatalf("reason %q", r.Reason)
	}
	if d.f.State().Session("bad") != nil {
		t.Fatal("a refused create left a session")
	}
	for _, id := range []string{"own", "forever", "default"} {
		d.do(closeCmd(id, time.Hour))
	}
	now := d.now
	for id, want := range map[string]int64{"own": now + time.Minute.Milliseconds(), "forever": 0, "default": now + time.Hour.Milliseconds()} {
		if got := d.session(id).DeleteAtMs; got != want {
			t.Errorf("%s: delete at %d; want %d", id, got, want)
		}
	}
}

func TestRetention_AClosedSessionIsDeletedAfterItsRetentionAndNotBefore(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "")
	d.createSession("b", "", "")
	d.createSession("open", "", "")
	d.createSession("kept", "", "")
	d.do(closeCmd("a", time.Minute))
	d.advance(30 * time.Second)
	d.do(closeCmd("b", time.Minute))
	d.do(closeCmd("kept", 0))
	st := d.f.State()
	if got := st.ClosedDue(d.now, 10); len(got) != 0 {
		t.Fatalf("due before their retention: %v", got)
	}
	// Named too early, a session is skipped, not deleted.
	d.do(d.expireClosedCmd("a", "b", "open", "kept", "nobody"))
	for _, id := range []string{"a", "b", "open", "kept"} {
		if d.f.State().IsDeleted(id) {
			t.Fatalf("%s deleted before its retention passed", id)
		}
	}
	d.advance(30 * time.Second) // a's minute has passed, b's not
	if got := d.f.State().ClosedDue(d.now, 10); len(got) != 1 || got[0] != "a" {
		t.Fatalf("due: %v; want [a]", got)
	}
	d.do(d.expireClosedCmd("a", "b"))
	if !d.f.State().IsDeleted("a") || d.f.State().IsDeleted("b") {
		t.Fatal("want a deleted and b kept")
	}
	d.advance(time.Hour)
	if got := d.f.State().ClosedDue(d.now, 10); len(got) != 1 || got[0] != "b" {
		t.Fatalf("due: %v; want [b] (kept is kept for ever, a is deleted)", got)
	}
	if got := d.f.State().ClosedDue(d.now, 0); got != nil {
		t.Fatalf("a limit of 0 read %v", got)
	}
}

func TestRetention_ExpireClosedSessionsRefusesBadInputAndAStaleEpoch(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "")
	d.do(closeCmd("a", time.Second))
	d.advance(time.Minute)
	many := make([]string, MaxExpireSessions+1)
	for i := range many {
		many[i] = "a"
	}
	for _, tc := range []struct {
		cmd  *fsmpb.Command
		code Code
		want string
	}{
		{d.expireClosedCmd(), CodeInvalid, "names 1..100 sessions, got 0"},
		{d.expireClosedCmd(many...), CodeInvalid, "names 1..100 sessions, got 101"},
		{d.expireClosedCmd(""), CodeInvalid, "session id is required"},
		{&fsmpb.Command{Body: &fsmpb.Command_ExpireClosedSessions{ExpireClosedSessions: &fsmpb.ExpireClosedSessions{Epoch: d.epoch - 1, SessionIds: []string{"a"}}}}, CodeFailedPrecondition, "stale dispatch epoch"},
	} {
		if r := d.refused(tc.cmd, tc.code); !strings.Contains(r.Reason, tc.want) {
			t.Errorf("reason %q; want %q", r.Reason, tc.want)
		}
	}
	d.do(d.expireClosedCmd("a"))
	if !d.f.State().IsDeleted("a") {
		t.Fatal("a due closed session was not deleted")
	}
}

// The index of closed sessions by deletion time survives a snapshot and a
// restore: a new leader finds the same work.
func TestRetention_DueSessionsAreFoundAfterARestart(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "")
	d.do(closeCmd("a", time.Minute))
	d.restart()
	d.advance(time.Minute)
	if got := d.f.State().ClosedDue(d.now, 10); len(got) != 1 || got[0] != "a" {
		t.Fatalf("due after a restart: %v", got)
	}
}
