package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

func deleteCmd(id string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_DeleteSession{DeleteSession: &fsmpb.DeleteSession{SessionId: id}}}
}

func (d *driver) purgeCmd(id string, max uint32) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_PurgeSession{PurgeSession: &fsmpb.PurgeSession{SessionId: id, MaxRows: max, Epoch: d.epoch}}}
}

// rowsOf counts a session's rows in every table that holds them.
func rowsOf(f *FSM, id string) map[string]int {
	tx := f.State().tx
	out := map[string]int{}
	for _, t := range sessionTables {
		out[t.table] = len(firstRows(tx, t, id, 1<<30))
	}
	tx.EachEventFrom(id, 0, func(*fsmpb.Event) bool { out[store.TableEvents]++; return true })
	if tx.EventLog(id) != nil {
		out[store.TableEventLogs]++
	}
	if tx.Session(id) != nil {
		out[store.TableSessions]++
	}
	return out
}

func total(rows map[string]int) int {
	n := 0
	for _, v := range rows {
		n += v
	}
	return n
}

// finishedSession creates a session that ran turns turns, each with a tool
// call, and is idle now.
func finishedSession(d *driver, id, parent string, turns int) {
	d.t.Helper()
	d.createSession(id, parent, "")
	for i := range turns {
		d.send(id, fmt.Sprintf("turn %d", i))
		d.startNext(id, kRunModel).answer("", call(fmt.Sprintf("c%d", i), "lookup", "{}"))
		d.startNext(id, kCallTool).claim().result("found")
		d.startNext(id, kRunModel).answer("done")
	}
	wantStatus(d.t.(*testing.T), d.session(id), sIdle)
}

func TestDeleteSession_RefusedWhileRunningOrWaitingAndChangesNothing(t *testing.T) {
	d := newDriver(t)
	d.createSession("run", "", "go")
	r := d.refused(deleteCmd("run"), CodeFailedPrecondition)
	if !strings.Contains(r.Reason, "session run is running: only an idle, paused, errored or closed session can be deleted") {
		t.Fatalf("reason %q", r.Reason)
	}
	toolTurn(t, d, "wait", call("q", "ask_user", `{"question":"?"}`), kQuestion)
	wantStatus(t, d.session("wait"), sWaiting)
	if r := d.refused(deleteCmd("wait"), CodeFailedPrecondition); !strings.Contains(r.Reason, "is waiting") {
		t.Fatalf("reason %q", r.Reason)
	}
	if r := d.refused(deleteCmd("nobody"), CodeNotFound); r.Reason != `session "nobody" not found` {
		t.Fatalf("reason %q", r.Reason)
	}
	d.refused(deleteCmd(""), CodeInvalid)
}

func TestDeleteSession_IdleErroredAndPausedAreDeletedAndHidden(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "idle", "", 1)
	d.createSession("err", "", "")
	d.send("err", "rejected")
	d.startNext("err", kRunModel).fail(eInvalid, "bad")
	wantStatus(t, d.session("err"), sErrored)
	childWithToolResults(t, d)
	for range 3 {
		d.startNext("c", kRunModel).fail(eInvalid, "tool result rejected")
		d.restart()
	}
	wantStatus(t, d.session("c"), sPaused)

	for _, id := range []string{"idle", "err", "c"} {
		if res := d.do(deleteCmd(id)); res.SessionID != id {
			t.Fatalf("deleted %q", res.SessionID)
		}
		st := d.f.State()
		if st.Session(id) != nil || st.SessionView(id) != nil {
			t.Fatalf("%s is still read after its delete", id)
		}
		for _, s := range st.Sessions() {
			if s.Id == id {
				t.Fatalf("%s is still listed", id)
			}
		}
		if page, _ := st.SessionsPage("", 100); len(page) != len(st.Sessions()) {
			t.Fatalf("a page lists %d sessions, not %d", len(page), len(st.Sessions()))
		}
		// Every command on it now finds nothing, and nothing changes.
		d.refused(deleteCmd(id), CodeNotFound)
		d.refused(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: id, MessageId: "late", Text: "hello?"}}}, CodeNotFound)
		d.refused(resume(id), CodeNotFound)
		d.refused(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id}}}, CodeAlreadyExists)
		d.refused(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "kid-of-" + id, ParentId: id}}}, CodeNotFound)
	}
	// The errored session is no longer owed a resume.
	if got := d.f.State().ErroredToResume(); len(got) != 0 {
		t.Fatalf("deleted sessions still owed a resume: %v", got)
	}
}

func TestDeleteSession_TheParentIsToldOnceAndChildrenKeepWorking(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "p", "", 0)
	finishedSession(d, "c", "p", 1)
	finishedSession(d, "g", "c", 0) // c's own child
	d.do(deleteCmd("c"))
	d.refused(deleteCmd("c"), CodeNotFound)
	told := 0
	for _, e := range d.session("p").History {
		if e.FromSession == "c" && e.Text == `<child-deleted agent="c">the agent was deleted</child-deleted>` {
			told++
		}
	}
	if told != 1 {
		t.Fatalf("the parent was told %d times; want once", told)
	}
	// The grandchild's parent is gone: it still runs turns and errors alone.
	d.send("g", "still here")
	d.startNext("g", kRunModel).answer("yes")
	d.send("g", "and now")
	d.startNext("g", kRunModel).fail(eInvalid, "bad")
	wantStatus(t, d.session("g"), sErrored)
}

func TestPurgeSession_BoundedPerCommandUntilEveryRowIsGone(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "doomed", "", 12)
	// Paused, so a message waits in its inbox.
	d.send("doomed", "one more")
	d.startNext("doomed", kRunModel).answer("", call("last", "lookup", "{}"))
	d.startNext("doomed", kCallTool).claim().result("found")
	for range 3 {
		d.startNext("doomed", kRunModel).fail(eInvalid, "tool result rejected")
		d.restart()
	}
	d.send("doomed", "are you there?")
	wantStatus(t, d.session("doomed"), sPaused)
	finishedSession(d, "other", "", 3)
	var applied []*Applied
	d.f.opts.OnApplied = func(a *Applied) { applied = append(applied, a) }
	other := rowsOf(d.f, "other")
	before := rowsOf(d.f, "doomed")
	for _, table := range []string{store.TableSteps, store.TableHistory, store.TableInbox, store.TableAccepted, store.TableEvents, store.TableEventLogs, store.TableSessions} {
		if before[table] == 0 {
			t.Fatalf("the fixture has no %s rows: %v", table, before)
		}
	}
	stepIDs := map[string]bool{}
	for _, st := range d.f.State().Steps("doomed") {
		stepIDs[st.Id] = true
	}

	// Not deleted yet: nothing is purged.
	d.refused(d.purgeCmd("doomed", 10), CodeFailedPrecondition)
	d.do(deleteCmd("doomed"))
	left := total(rowsOf(d.f, "doomed"))
	const max = 7
	purges := 0
	touchedSteps := map[string]bool{}
	for left > 0 {
		applied = nil
		d.do(d.purgeCmd("doomed", max))
		purges++
		now := total(rowsOf(d.f, "doomed"))
		if left-now > max || now >= left {
			t.Fatalf("a purge removed %d rows (%d -> %d); want 1..%d", left-now, left, now, max)
		}
		left = now
		for _, id := range applied[0].Steps {
			touchedSteps[id] = true
		}
		if purges > 100 {
			t.Fatal("the purge does not end")
		}
	}
	if want := (total(before) + 1 + max - 1) / max; purges > want+1 {
		t.Fatalf("%d purges for %d rows", purges, total(before))
	}
	// The last purge removed the header and said so to the broker.
	if got := applied[0].Sessions; len(got) != 1 || got[0] != "doomed" {
		t.Fatalf("the last purge reported sessions %v", got)
	}
	if len(touchedSteps) != len(stepIDs) {
		t.Fatalf("the purges reported %d Steps; %d were removed", len(touchedSteps), len(stepIDs))
	}
	if got := rowsOf(d.f, "other"); fmt.Sprint(got) != fmt.Sprint(other) {
		t.Fatalf("another session's rows changed: %v, was %v", got, other)
	}
	d.refused(d.purgeCmd("doomed", max), CodeNotFound)

	// Gone from the next snapshot too, and the id can be used again.
	var buf bytes.Buffer
	if err := d.f.Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("doomed")) {
		t.Fatal("the snapshot still holds something of the deleted session")
	}
	d.createSession("doomed", "", "")
}

func TestPurgeSession_BadOrStaleCommandsAreRefused(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "s", "", 1)
	d.do(deleteCmd("s"))
	d.refused(d.purgeCmd("s", 0), CodeInvalid)
	d.refused(d.purgeCmd("s", MaxPurgeRows+1), CodeInvalid)
	d.refused(d.purgeCmd("", 5), CodeInvalid)
	d.refused(d.purgeCmd("nobody", 5), CodeNotFound)
	stale := d.purgeCmd("s", 5)
	d.newEpoch()
	if r := d.refused(stale, CodeFailedPrecondition); !strings.Contains(r.Reason, "stale dispatch epoch") {
		t.Fatalf("reason %q", r.Reason)
	}
}

func TestDeleteSession_ATombstoneSurvivesARestartAndIsPurgedAfter(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "s", "", 2)
	d.do(deleteCmd("s"))
	d.do(d.purgeCmd("s", 3))
	d.restart()
	if got := d.f.State().DeletedSessions(10); len(got) != 1 || got[0] != "s" {
		t.Fatalf("deleted sessions after a restart: %v", got)
	}
	if d.f.State().Session("s") != nil {
		t.Fatal("a restart brought the deleted session back")
	}
	for total(rowsOf(d.f, "s")) > 0 {
		d.do(d.purgeCmd("s", MaxPurgeRows))
	}
	if got := d.f.State().DeletedSessions(10); len(got) != 0 {
		t.Fatalf("still owed a purge: %v", got)
	}
}

func TestExpireSessions_OnlyIdleSessionsIdleLongEnough(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "old", "", 1)
	finishedSession(d, "older", "", 0)
	d.send("older", "x")
	d.startNext("older", kRunModel).answer("y")
	d.advance(time.Hour)
	cutoff := d.now
	d.advance(time.Minute)
	finishedSession(d, "young", "", 1)
	d.createSession("busy", "", "go")
	d.f.State()
	if got := d.f.State().IdleBefore(cutoff, 10); fmt.Sprint(got) != "[old older]" {
		t.Fatalf("idle before the cutoff: %v", got)
	}
	if got := d.f.State().IdleBefore(cutoff, 1); fmt.Sprint(got) != "[old]" {
		t.Fatalf("one idle before the cutoff: %v", got)
	}
	expire := func(epoch uint64, before int64, ids ...string) *fsmpb.Command {
		return &fsmpb.Command{Body: &fsmpb.Command_ExpireSessions{ExpireSessions: &fsmpb.ExpireSessions{Epoch: epoch, IdleBeforeMs: before, SessionIds: ids}}}
	}
	d.refused(expire(d.epoch, cutoff), CodeInvalid)
	d.refused(expire(d.epoch, 0, "old"), CodeInvalid)
	d.refused(expire(d.epoch-1, cutoff, "old"), CodeFailedPrecondition)
	// A message reached "older" after the leader read it: it is left alone.
	d.send("older", "back again")
	d.do(expire(d.epoch, cutoff, "old", "older", "young", "busy", "nobody"))
	st := d.f.State()
	if st.Session("old") != nil {
		t.Fatal("an idle session past the retention was kept")
	}
	for _, id := range []string{"older", "young", "busy"} {
		if st.Session(id) == nil {
			t.Fatalf("%s was expired", id)
		}
	}
	if got := st.DeletedSessions(10); fmt.Sprint(got) != "[old]" {
		t.Fatalf("owed a purge: %v", got)
	}
}
