package fsm

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// importPlan is the commands that import a session: what the leader's
// ImportSession proposes for an archive of it.
type importPlan struct {
	begin *fsmpb.Command
	pages []*fsmpb.Command
	end   *fsmpb.Command
}

func (p importPlan) all() []*fsmpb.Command {
	return append(append([]*fsmpb.Command{p.begin}, p.pages...), p.end)
}

// planImport reads session from st as an archive holds it and returns the
// commands importing it under the id to (the same id or another one) in
// epoch, perPage rows a page.
func planImport(st *State, from, to string, epoch uint64, perPage int) importPlan {
	s := st.Session(from).CloneVT()
	s.Id = to
	inbox := st.Inbox(from, math.MaxInt)
	begin := &fsmpb.ImportSessionBegin{Epoch: epoch, Session: s, LastEventSeq: st.EventLog(from).GetLastSeq()}
	for _, m := range inbox {
		m = m.CloneVT()
		m.SessionId = to
		begin.Inbox = append(begin.Inbox, m)
	}
	end := &fsmpb.ImportSessionEnd{SessionId: to, Epoch: epoch}
	var pages []*fsmpb.Command
	page := &fsmpb.ImportSessionPage{SessionId: to, Epoch: epoch}
	flush := func(force bool) {
		if n := len(page.History) + len(page.Steps) + len(page.Folded) + len(page.Events); n > 0 && (force || n >= perPage) {
			pages = append(pages, &fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: page}})
			page = &fsmpb.ImportSessionPage{SessionId: to, Epoch: epoch}
		}
	}
	history, _ := st.History(from, 0, math.MaxInt, math.MaxInt)
	for _, h := range history {
		h = h.CloneVT()
		h.SessionId = to
		page.History = append(page.History, h)
		end.History++
		flush(false)
	}
	for _, x := range st.Steps(from) {
		x = x.CloneVT()
		x.SessionId, x.Id = to, StepID(to, x.Number)
		page.Steps = append(page.Steps, x)
		end.Steps++
		flush(false)
	}
	for _, f := range foldedOf(st, from) {
		f = f.CloneVT()
		f.SessionId = to
		page.Folded = append(page.Folded, f)
		end.Folded++
		flush(false)
	}
	for _, ev := range st.Events(from, 0) {
		ev = ev.CloneVT()
		ev.SessionId = to
		page.Events = append(page.Events, ev)
		end.Events++
		flush(false)
	}
	flush(true)
	return importPlan{
		begin: &fsmpb.Command{Body: &fsmpb.Command_ImportSessionBegin{ImportSessionBegin: begin}},
		pages: pages,
		end:   &fsmpb.Command{Body: &fsmpb.Command_ImportSessionEnd{ImportSessionEnd: end}},
	}
}

// closedSession makes session id: two turns (one with a tool call and a
// failed attempt), closed with a retention of an hour.
func closedSession(d *driver, id string) {
	d.t.Helper()
	d.createSession(id, "", "hello")
	d.startNext(id, kRunModel).fail(fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down")
	d.advance(time.Minute)
	d.startNext(id, kRunModel).answer("looking", call("c1", "lookup", `{"q":"x"}`))
	d.startNext(id, kCallTool).result("found")
	d.startNext(id, kRunModel).answer("done")
	d.do(sendCmd(id, id+"/m2", "again"))
	d.startNext(id, kRunModel).answer("ok")
	d.do(closeCmd(id, time.Hour))
}

// sessionBytes is what a session holds as its archive would show it:
// header, history, inbox, Steps, folded turns and events, the deletion
// time left out.
func sessionBytes(t testing.TB, st *State, id string) string {
	t.Helper()
	s := st.SessionView(id)
	if s == nil {
		t.Fatalf("session %s is not there", id)
	}
	s.DeleteAtMs = 0
	var b strings.Builder
	add := func(m proto.Message) {
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%x\n", raw)
	}
	add(s)
	for _, x := range st.Steps(id) {
		add(x)
	}
	for _, f := range foldedOf(st, id) {
		add(f)
	}
	for _, ev := range st.Events(id, 0) {
		add(ev)
	}
	add(st.EventLog(id))
	return b.String()
}

// A closed session imported into another cluster, page by page, is the
// same session there: header, history, Steps with their attempts, events,
// and the retention counted from the import.
func TestImportSession_AClosedSessionComesBackAsItWas(t *testing.T) {
	src := newDriver(t)
	closedSession(src, "s")
	dst := newDriver(t)
	dst.advance(48 * time.Hour)
	plan := planImport(src.f.State(), "s", "s", dst.epoch, 3)
	if len(plan.pages) < 3 {
		t.Fatalf("%d pages; the test wants several", len(plan.pages))
	}
	for _, cmd := range append([]*fsmpb.Command{plan.begin}, plan.pages...) {
		dst.do(cmd)
	}
	dst.do(plan.end)

	if got, want := sessionBytes(t, dst.f.State(), "s"), sessionBytes(t, src.f.State(), "s"); got != want {
		t.Fatalf("the imported session differs from the archived one:\n%s\nwant\n%s", got, want)
	}
	s := dst.session("s")
	wantStatus(t, s, sClosed)
	if s.DeleteAtMs != dst.now+time.Hour.Milliseconds() {
		t.Fatalf("delete_at_ms %d; want the import's time plus the hour of retention (%d)", s.DeleteAtMs, dst.now+time.Hour.Milliseconds())
	}
	if due := dst.f.State().ClosedDue(dst.now+time.Hour.Milliseconds(), 10); len(due) != 1 || due[0] != "s" {
		t.Fatalf("closed sessions due an hour after the import: %v; want s", due)
	}
	checkRunningFigures(t, dst.f.State(), s)
	checkTableSizes(t, dst.f.State())
	// Events emitted after the import come after the imported ones.
	dst.do(&fsmpb.Command{Body: &fsmpb.Command_DeleteSession{DeleteSession: &fsmpb.DeleteSession{SessionId: "s"}}})
	evs := dst.f.State().Events("s", 0)
	if n := len(evs); n < 2 || evs[n-1].Type != "session_deleted" || evs[n-1].Seq <= evs[n-2].Seq || evs[n-1].Ordinal != evs[n-2].Ordinal+1 {
		t.Fatalf("the event after the import: %v", evs[len(evs)-1])
	}
}

// Until its end the session is not there for any read or command; its
// rows do not show in any index of sessions or Steps.
func TestImportSession_HiddenUntilItsEnd(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	plan := planImport(d.f.State(), "s", "copy", d.epoch, 4)
	d.do(plan.begin)
	d.do(plan.pages[0])
	st := d.f.State()
	if st.Session("copy") != nil {
		t.Fatal("GetSession sees a session being imported")
	}
	for _, s := range st.Sessions() {
		if s.Id == "copy" {
			t.Fatal("Sessions lists a session being imported")
		}
	}
	if page, _ := st.SessionsPage("", 100); len(page) != 1 {
		t.Fatalf("ListSessions shows %d sessions; want only s", len(page))
	}
	counts := st.SessionCounts()
	if counts.ByStatus[sClosed] != 1 || counts.ByStatus[fsmpb.SessionStatus_SESSION_STATUS_UNSPECIFIED] != 0 || counts.ByLifecycle[LifecycleClosed] != 1 || counts.ByLifecycle[LifecycleOpen] != 0 {
		t.Fatalf("counts %v; want one closed session", counts)
	}
	if c := st.Counts(); c.Sessions["importing"] != 1 || c.Sessions["closed"] != 1 {
		t.Fatalf("a backup's counts %v; want one closed session and one importing", c.Sessions)
	}
	if due := st.ClosedDue(math.MaxInt64, 10); len(due) != 1 {
		t.Fatalf("closed sessions due: %v; want s only", due)
	}
	if ids := st.IdleBefore(math.MaxInt64, 10); len(ids) != 0 {
		t.Fatalf("idle sessions: %v", ids)
	}
	if ids := st.DeletedSessions(10); len(ids) != 0 {
		t.Fatalf("deleted sessions: %v", ids)
	}
	d.refused(sendCmd("copy", "x", "hi"), CodeNotFound)
	d.refused(closeCmd("copy", 0), CodeNotFound)
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_DeleteSession{DeleteSession: &fsmpb.DeleteSession{SessionId: "copy"}}}, CodeNotFound)
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_ReconcileOutcome{ReconcileOutcome: &fsmpb.ReconcileOutcome{StepId: StepID("copy", 1), Outcome: oFailed}}}, CodeNotFound)
	r := d.refused(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "copy"}}}, CodeAlreadyExists)
	if !strings.Contains(r.Reason, "being imported") {
		t.Fatalf("reason %q", r.Reason)
	}
	for _, cmd := range plan.pages[1:] {
		d.do(cmd)
	}
	d.do(plan.end)
	if s := d.f.State().Session("copy"); s == nil || s.Status != sClosed {
		t.Fatalf("after its end the import is %v; want a closed session", s)
	}
	if page, _ := d.f.State().SessionsPage("", 100); len(page) != 2 {
		t.Fatalf("ListSessions shows %d sessions; want s and copy", len(page))
	}
}

// An id the cluster holds, or is importing, is not imported again.
func TestImportSession_AnExistingIdIsRefused(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	r := d.refused(planImport(d.f.State(), "s", "s", d.epoch, 10).begin, CodeAlreadyExists)
	if r.Reason != `session "s" already exists` {
		t.Fatalf("reason %q", r.Reason)
	}
	plan := planImport(d.f.State(), "s", "copy", d.epoch, 10)
	d.do(plan.begin)
	r = d.refused(plan.begin, CodeAlreadyExists)
	if r.Reason != `session "copy" is being imported` {
		t.Fatalf("reason %q", r.Reason)
	}
}

// End refuses pages that brought other counts than the archive's, and
// pages out of archive order are refused as they come.
func TestImportSession_BadCountsAndOrderAreRefused(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	plan := planImport(d.f.State(), "s", "copy", d.epoch, 100)
	d.do(plan.begin)
	end := plan.end.GetImportSessionEnd()
	short := clone(plan.end)
	short.GetImportSessionEnd().Events++
	r := d.refused(short, CodeInvalid)
	if !strings.Contains(r.Reason, "brought 0 history entries, 0 Steps, 0 folded turns and 0 events") {
		t.Fatalf("reason %q", r.Reason)
	}

	page := plan.pages[0].GetImportSessionPage()
	swapped := clone(plan.pages[0])
	h := swapped.GetImportSessionPage().History
	h[0], h[1] = h[1], h[0]
	d.refused(swapped, CodeInvalid)
	foreign := clone(plan.pages[0])
	foreign.GetImportSessionPage().Steps[0].SessionId = "s"
	d.refused(foreign, CodeInvalid)
	gap := clone(plan.pages[0])
	gap.GetImportSessionPage().Events[1].Ordinal++
	d.refused(gap, CodeInvalid)

	// History after Steps: the archive's order is history, Steps, events.
	stepsOnly := &fsmpb.ImportSessionPage{SessionId: "copy", Epoch: d.epoch, Steps: page.Steps}
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: stepsOnly}})
	late := &fsmpb.ImportSessionPage{SessionId: "copy", Epoch: d.epoch, History: page.History}
	r = d.refused(&fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: late}}, CodeInvalid)
	if !strings.Contains(r.Reason, "archive order") {
		t.Fatalf("reason %q", r.Reason)
	}
	r = d.refused(plan.end, CodeInvalid)
	if want := fmt.Sprintf("brought 0 history entries, %d Steps, 0 folded turns and 0 events; its archive counts %d, %d, 0 and %d", end.Steps, end.History, end.Steps, end.Events); !strings.Contains(r.Reason, want) {
		t.Fatalf("reason %q; want %q", r.Reason, want)
	}
	if d.f.State().Session("copy") != nil {
		t.Fatal("a refused end showed the session")
	}
}

// A session in a turn, or one whose Steps have not all ended, is refused:
// only a session at rest is imported.
func TestImportSession_ASessionInATurnIsRefused(t *testing.T) {
	d := newDriver(t)
	d.createSession("busy", "", "hello")
	plan := planImport(d.f.State(), "busy", "copy", d.epoch, 100)
	r := d.refused(plan.begin, CodeFailedPrecondition)
	if !strings.Contains(r.Reason, "was running when it was archived: only a session at rest") {
		t.Fatalf("reason %q", r.Reason)
	}

	// A header at rest with a Step that still runs.
	d.startNext("busy", kRunModel)
	idle := clone(plan.begin)
	idle.GetImportSessionBegin().Session.Status = fsmpb.SessionStatus_SESSION_STATUS_IDLE
	idle.GetImportSessionBegin().Session.Turn = nil
	d.do(idle)
	running := planImport(d.f.State(), "busy", "copy", d.epoch, 100)
	page := running.pages[len(running.pages)-1]
	page.GetImportSessionPage().History = nil
	page.GetImportSessionPage().Events = nil
	r = d.refused(page, CodeFailedPrecondition)
	if !strings.Contains(r.Reason, "has not ended") {
		t.Fatalf("reason %q", r.Reason)
	}
}

// A page holds at most MaxImportRows rows and, unless it holds one row,
// MaxImportBytes.
func TestImportSession_PagesAreBounded(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	d.do(planImport(d.f.State(), "s", "copy", d.epoch, 10).begin)
	many := &fsmpb.ImportSessionPage{SessionId: "copy", Epoch: d.epoch}
	for i := range MaxImportRows + 1 {
		many.Events = append(many.Events, &fsmpb.Event{SessionId: "copy", Seq: uint64(i + 1), Ordinal: uint64(i + 1)})
	}
	r := d.refused(&fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: many}}, CodeInvalid)
	if !strings.Contains(r.Reason, "at most 500 rows") {
		t.Fatalf("reason %q", r.Reason)
	}
	big := strings.Repeat("x", MaxImportBytes/2+1)
	two := &fsmpb.ImportSessionPage{SessionId: "copy", Epoch: d.epoch, Events: []*fsmpb.Event{
		{SessionId: "copy", Seq: 1, Ordinal: 1, Detail: big}, {SessionId: "copy", Seq: 2, Ordinal: 2, Detail: big},
	}}
	r = d.refused(&fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: two}}, CodeInvalid)
	if !strings.Contains(r.Reason, "unless it is one row") {
		t.Fatalf("reason %q", r.Reason)
	}
}

// A new leader's RestartSessions discards an import begun under an
// earlier epoch: its pages are refused from then on, and its rows are
// purged as a deleted session's.
func TestImportSession_DiscardedByANewLeader(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	plan := planImport(d.f.State(), "s", "copy", d.epoch, 4)
	d.do(plan.begin)
	d.do(plan.pages[0])
	d.do(plan.pages[1])
	d.restart()

	if ids := d.f.State().DeletedSessions(10); len(ids) != 1 || ids[0] != "copy" {
		t.Fatalf("deleted sessions after the restart: %v; want the discarded import", ids)
	}
	r := d.refused(plan.pages[2], CodeFailedPrecondition) // the old epoch's
	if !strings.Contains(r.Reason, "stale dispatch epoch") {
		t.Fatalf("reason %q", r.Reason)
	}
	again := planImport(d.f.State(), "s", "copy", d.epoch, 4)
	d.refused(again.pages[2], CodeNotFound)
	r = d.refused(again.begin, CodeAlreadyExists) // until the purge
	if !strings.Contains(r.Reason, "still being removed") {
		t.Fatalf("reason %q", r.Reason)
	}
	for d.f.State().IsDeleted("copy") {
		d.do(&fsmpb.Command{Body: &fsmpb.Command_PurgeSession{PurgeSession: &fsmpb.PurgeSession{SessionId: "copy", MaxRows: 3, Epoch: d.epoch}}})
	}
	for _, table := range []string{store.TableSteps, store.TableHistory, store.TableInbox, store.TableAccepted} {
		for range d.f.State().tx.SessionRowsOf(table, "copy") {
			t.Fatalf("table %s keeps a row of the discarded import", table)
		}
	}
	if d.f.State().EventLog("copy") != nil || len(d.f.State().Events("copy", 0)) != 0 {
		t.Fatal("the discarded import's events or event log are left")
	}
	// Sent again, it is imported.
	for _, cmd := range again.all() {
		d.do(cmd)
	}
	if s := d.f.State().Session("copy"); s == nil || s.HistoryCount != d.session("s").HistoryCount {
		t.Fatalf("imported again: %v", s)
	}
}

// An import of an epoch the import did not begin in is refused.
func TestImportSession_AnotherEpochsPageIsRefused(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	plan := planImport(d.f.State(), "s", "copy", d.epoch, 4)
	d.do(plan.begin)
	d.newEpoch() // a new leader that has not restarted the sessions yet
	moved := planImport(d.f.State(), "s", "copy", d.epoch, 4)
	r := d.refused(moved.pages[0], CodeFailedPrecondition)
	if !strings.Contains(r.Reason, "began in epoch") {
		t.Fatalf("reason %q", r.Reason)
	}
}

// CheckImport refuses, without the state, what Begin, a Page or End would
// refuse for the commands' content, and passes a whole import.
func TestCheckImport_RefusesWhatTheCommandsWould(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	plan := planImport(d.f.State(), "s", "copy", d.epoch, 4)
	pages := func(p importPlan) []*fsmpb.ImportSessionPage {
		var out []*fsmpb.ImportSessionPage
		for _, c := range p.pages {
			out = append(out, c.GetImportSessionPage())
		}
		return out
	}
	if r := CheckImport(plan.begin.GetImportSessionBegin(), pages(plan), plan.end.GetImportSessionEnd()); r != nil {
		t.Fatalf("a whole import: %v", r)
	}
	short := clone(plan.end).GetImportSessionEnd()
	short.Steps--
	if r := CheckImport(plan.begin.GetImportSessionBegin(), pages(plan), short); r == nil || r.Code != CodeInvalid {
		t.Fatalf("an end counting one Step less: %v", r)
	}
	late := pages(plan)
	late[0], late[len(late)-1] = late[len(late)-1], late[0]
	if r := CheckImport(plan.begin.GetImportSessionBegin(), late, plan.end.GetImportSessionEnd()); r == nil || !strings.Contains(r.Reason, "archive order") {
		t.Fatalf("the last page first: %v", r)
	}
	other := clone(plan.pages[1]).GetImportSessionPage()
	other.SessionId = "s"
	mixed := append([]*fsmpb.ImportSessionPage{pages(plan)[0], other}, pages(plan)[2:]...)
	if r := CheckImport(plan.begin.GetImportSessionBegin(), mixed, plan.end.GetImportSessionEnd()); r == nil || r.Code != CodeInvalid {
		t.Fatalf("a page of another session: %v", r)
	}
}

// A header whose counters could not go on, or whose inbox is out of
// order, is refused at Begin.
func TestImportSession_ImpossibleHeadersAreRefused(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	plan := planImport(d.f.State(), "s", "copy", d.epoch, 10)
	huge := clone(plan.begin)
	huge.GetImportSessionBegin().LastEventSeq = math.MaxUint64
	if r := d.refused(huge, CodeInvalid); !strings.Contains(r.Reason, "not a session a cluster wrote") {
		t.Fatalf("reason %q", r.Reason)
	}
	twice := clone(plan.begin)
	b := twice.GetImportSessionBegin()
	b.Session.InboxCount, b.Session.NextInbox = 2, 9
	b.Inbox = []*fsmpb.InboxMessage{{Id: "a", SessionId: "copy", Seq: 3}, {Id: "b", SessionId: "copy", Seq: 3}}
	if r := d.refused(twice, CodeInvalid); !strings.Contains(r.Reason, "inbox message 3 is not the next one") {
		t.Fatalf("reason %q", r.Reason)
	}
}

// An errored session comes back errored, and goes on where it was: a
// resume retries its kept turn with the next Step number.
func TestImportSession_AnErroredSessionGoesOnAfterTheImport(t *testing.T) {
	src := newDriver(t)
	src.createSession("s", "", "hello")
	src.startNext("s", kRunModel).answer("looking", call("c1", "lookup", `{"q":"x"}`))
	src.startNext("s", kCallTool).result("found")
	src.startNext("s", kRunModel).fail(fsmpb.ErrorType_ERROR_TYPE_INVALID_REQUEST, "bad request")
	before := src.session("s")
	wantStatus(t, before, fsmpb.SessionStatus_SESSION_STATUS_ERRORED)
	if before.Turn == nil {
		t.Fatal("the errored session keeps no turn: the test wants one")
	}
	dst := newDriver(t)
	for _, cmd := range planImport(src.f.State(), "s", "s", dst.epoch, 2).all() {
		dst.do(cmd)
	}
	if got, want := sessionBytes(t, dst.f.State(), "s"), sessionBytes(t, src.f.State(), "s"); got != want {
		t.Fatal("the imported errored session differs from the archived one")
	}
	dst.do(resume("s"))
	next := dst.queued("s", kRunModel)
	if next == nil || next.Number != before.NextStep || next.Id != StepID("s", before.NextStep) {
		t.Fatalf("after a resume the queued RunModel is %v; want Step %d", next, before.NextStep)
	}
	dst.startNext("s", kRunModel).answer("done")
	wantStatus(t, dst.session("s"), fsmpb.SessionStatus_SESSION_STATUS_IDLE)
	checkRunningFigures(t, dst.f.State(), dst.session("s"))
}

// A session whose older turns folded is imported with its folded turns;
// folded turns out of order, after the events, or that do not add up to
// the Steps the header counts as folded are refused.
func TestImportSession_FoldedTurnsComeBackAndAreChecked(t *testing.T) {
	d := newDriver(t)
	closedSession(d, "s")
	d.setFolding(1)
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	if n := len(foldedOf(d.f.State(), "s")); n != 1 {
		t.Fatalf("%d folded turns; want the first turn folded", n)
	}
	plan := planImport(d.f.State(), "s", "copy", d.epoch, 3)
	var foldedPage *fsmpb.ImportSessionPage
	for _, p := range plan.pages {
		if pp := p.GetImportSessionPage(); len(pp.Folded) > 0 {
			foldedPage = pp
		}
	}
	if foldedPage == nil {
		t.Fatal("the plan brings no folded turn")
	}

	// Refused outright: a folded turn past the one the header folded
	// through, one of another session, one that folds nothing.
	for name, bad := range map[string]func(f *fsmpb.FoldedTurn){
		"past the header's":  func(f *fsmpb.FoldedTurn) { f.Turn = 99 },
		"of another session": func(f *fsmpb.FoldedTurn) { f.SessionId = "s" },
		"folding no Step":    func(f *fsmpb.FoldedTurn) { f.Steps = 0 },
	} {
		page := foldedPage.CloneVT()
		bad(page.Folded[0])
		if r := CheckImport(plan.begin.GetImportSessionBegin(), replacePage(plan, foldedPage, page), plan.end.GetImportSessionEnd()); r == nil || !strings.Contains(r.Reason, "folded turn") {
			t.Fatalf("a folded turn %s: %v", name, r)
		}
	}
	// Counted Steps that the folded turns do not fold.
	header := plan.begin.GetImportSessionBegin().CloneVT()
	header.Session.FoldedSteps++
	if r := CheckImport(header, pages(plan.pages), plan.end.GetImportSessionEnd()); r == nil || !strings.Contains(r.Reason, "folded Steps") {
		t.Fatalf("a header counting a folded Step too many: %v", r)
	}

	for _, c := range plan.all() {
		d.do(c)
	}
	got, want := foldedOf(d.f.State(), "copy"), foldedOf(d.f.State(), "s")
	if len(got) != 1 {
		t.Fatalf("%d folded turns imported; want 1", len(got))
	}
	g := got[0].CloneVT()
	g.SessionId = "s"
	if !proto.Equal(g, want[0]) {
		t.Fatalf("imported folded turn %v; want %v", got[0], want[0])
	}
	if c := d.f.State().Session("copy"); c.FoldedThroughTurn != 1 || c.FoldedSteps != uint64(want[0].Steps) {
		t.Fatalf("the imported session is folded through %d (%d Steps); want 1 (%d)", c.FoldedThroughTurn, c.FoldedSteps, want[0].Steps)
	}
}

func pages(cs []*fsmpb.Command) []*fsmpb.ImportSessionPage {
	var out []*fsmpb.ImportSessionPage
	for _, c := range cs {
		out = append(out, c.GetImportSessionPage())
	}
	return out
}

// replacePage is the plan's pages with old replaced by repl.
func replacePage(p importPlan, old, repl *fsmpb.ImportSessionPage) []*fsmpb.ImportSessionPage {
	out := pages(p.pages)
	for i, pg := range out {
		if pg == old {
			out[i] = repl
		}
	}
	return out
}
