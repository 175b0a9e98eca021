package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// fork builds a fork's commands from the driver's state, as the leader
// does, and applies them; it returns the pages it proposed.
func (d *driver) fork(source string, atSeq uint64, o ForkOptions) []*fsmpb.ImportSessionPage {
	d.t.Helper()
	begin, pages, end, r := d.f.State().ForkCommands(source, atSeq, o, d.epoch)
	if r != nil {
		d.t.Fatalf("fork of %s at %d refused: %v", source, atSeq, r)
	}
	d.do(forkBeginCmd(begin))
	for _, p := range pages {
		d.do(&fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: p}})
	}
	d.do(forkEndCmd(end))
	return pages
}

func forkBeginCmd(c *fsmpb.ForkSessionBegin) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ForkSessionBegin{ForkSessionBegin: c}}
}

func forkEndCmd(c *fsmpb.ForkSessionEnd) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_ForkSessionEnd{ForkSessionEnd: c}}
}

func historyOf(d *driver, id string) []*fsmpb.HistoryEntry {
	h, _ := d.f.State().History(id, 0, 1<<30, 1<<30)
	return h
}

// forksOf is what ListSessions finds with forked_from.
func forksOf(d *driver, source string) []string {
	page, _ := d.f.State().ListSessions(store.SessionFilter{ForkedFrom: source}, store.ListByCreated, false, nil, 100)
	var out []string
	for _, s := range page {
		out = append(out, s.Id)
	}
	return out
}

func eventDetails(d *driver, id, typ string) []string {
	var out []string
	for _, ev := range d.f.State().Events(id, 0) {
		if ev.Type == typ {
			out = append(out, ev.Detail)
		}
	}
	return out
}

// A fork copies the source's entries up to at_seq, as they were recorded,
// with the source's settings; its message starts a turn whose only Step is
// a model call: no tool call of the copied entries is queued again.
func TestFork_CopiesThePrefixAndItsMessageStartsOneModelCall(t *testing.T) {
	d := newDriver(t)
	d.do(createLabelled("src", lbl("team", "red")))
	for i := range 3 {
		d.send("src", fmt.Sprintf("turn %d", i))
		d.startNext("src", kRunModel).answer("", call(fmt.Sprintf("c%d", i), "lookup", "{}"))
		d.startNext("src", kCallTool).claim().result(fmt.Sprintf("found %d", i))
		d.startNext("src", kRunModel).answer(fmt.Sprintf("done %d", i))
	}
	srcBefore := historyOf(d, "src")
	srcSteps := len(d.f.State().Steps("src"))
	d.advance(1000)
	d.fork("src", 8, ForkOptions{ID: "f1", Message: "try another way", MessageID: "f1/first"})

	f := d.session("f1")
	if f.ForkedFrom != "src" || f.ForkedAtSeq != 8 || labelText(f) != "team=red" || f.ParentId != "" {
		t.Fatalf("fork header: from %q at %d, labels %q, parent %q", f.ForkedFrom, f.ForkedAtSeq, labelText(f), f.ParentId)
	}
	wantStatus(t, f, sRunning)
	got := historyOf(d, "f1")
	if len(got) != 9 {
		t.Fatalf("the fork has %d entries; want the 8 copied and its message", len(got))
	}
	for i, e := range got[:8] {
		want := clone(srcBefore[i])
		want.SessionId = "f1"
		if !proto.Equal(e, want) {
			t.Fatalf("entry %d of the fork is %v; want the source's %v", i+1, e, want)
		}
	}
	if m := got[8]; m.Seq != 9 || m.Kind != fsmpb.HistoryKind_HISTORY_KIND_USER || m.Text != "try another way" {
		t.Fatalf("the fork's message is %v", m)
	}
	if f.HistoryCount != 9 || f.HistorySize != got[8].CumSize {
		t.Fatalf("fork counts %d entries of %d; its rows are 9 of %d", f.HistoryCount, f.HistorySize, got[8].CumSize)
	}
	steps := d.f.State().Steps("f1")
	if len(steps) != 1 || steps[0].Kind != kRunModel || steps[0].Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("the fork's Steps are %v; want one queued RunModel", steps)
	}
	// The source is as it was, and records the fork in its events.
	if !slices.EqualFunc(historyOf(d, "src"), srcBefore, func(a, b *fsmpb.HistoryEntry) bool { return proto.Equal(a, b) }) ||
		len(d.f.State().Steps("src")) != srcSteps {
		t.Fatal("forking changed the source's history or Steps")
	}
	if ev := eventDetails(d, "src", "fork_created"); !slices.Equal(ev, []string{"f1 at entry 8"}) {
		t.Fatalf("the source's fork_created events: %v", ev)
	}
	if ev := eventDetails(d, "f1", "session_forked"); !slices.Equal(ev, []string{"src at entry 8"}) {
		t.Fatalf("the fork's session_forked events: %v", ev)
	}
	// The fork's turn runs as any other, and its counters go on.
	d.startNext("f1", kRunModel).answer("another way")
	wantStatus(t, d.session("f1"), sIdle)
	if h := historyOf(d, "f1"); h[len(h)-1].Seq != 10 {
		t.Fatalf("the fork's answer is entry %d; want 10", h[len(h)-1].Seq)
	}
}

// Without a message a fork is idle; labels and agent given replace the
// source's; the list index finds a source's forks.
func TestFork_WithoutMessageIdleAndOptionsReplaceTheSources(t *testing.T) {
	d := newDriver(t)
	d.do(createLabelled("src", lbl("team", "red", "env", "prod")))
	d.send("src", "hello")
	d.startNext("src", kRunModel).answer("hi")
	d.fork("src", 2, ForkOptions{ID: "f1"})
	d.advance(1000)
	d.fork("src", 1, ForkOptions{ID: "f2", Agent: "writer", Provider: "p2", Labels: lbl("team", "blue")})
	f1, f2 := d.session("f1"), d.session("f2")
	wantStatus(t, f1, sIdle)
	if labelText(f1) != "env=prod,team=red" || f1.Agent != "" {
		t.Fatalf("f1 labels %q agent %q; want the source's", labelText(f1), f1.Agent)
	}
	if labelText(f2) != "team=blue" || f2.Agent != "writer" || f2.Provider != "p2" {
		t.Fatalf("f2 labels %q agent %q provider %q", labelText(f2), f2.Agent, f2.Provider)
	}
	if got := forksOf(d, "src"); !slices.Equal(got, []string{"f1", "f2"}) {
		t.Fatalf("the forks of src listed: %v", got)
	}
	if got := forksOf(d, "f1"); len(got) != 0 {
		t.Fatalf("f1 has no forks; listed %v", got)
	}
	// A fork of a fork names its own source.
	d.fork("f1", 2, ForkOptions{ID: "f3"})
	if got := forksOf(d, "f1"); !slices.Equal(got, []string{"f3"}) {
		t.Fatalf("the forks of f1 listed: %v", got)
	}
}

// Every refusal names its reason and changes nothing.
func TestFork_RefusalsChangeNothing(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "src", "", 2) // entries 1-8
	d.createSession("taken", "", "")
	begin := func(at uint64, id string) *fsmpb.Command {
		b, _, _, r := d.f.State().ForkCommands("src", at, ForkOptions{ID: id}, d.epoch)
		if r != nil {
			t.Fatalf("fork commands at %d: %v", at, r)
		}
		return forkBeginCmd(b)
	}
	wantReason := func(r *Rejection, code Code, want string) {
		t.Helper()
		if r == nil || r.Code != code || !strings.Contains(r.Reason, want) {
			t.Fatalf("refusal %v; want %s with %q", r, code, want)
		}
	}
	st := d.f.State()
	_, _, _, r := st.ForkCommands("nope", 1, ForkOptions{ID: "f"}, d.epoch)
	wantReason(r, CodeNotFound, `session "nope" not found`)
	_, _, _, r = st.ForkCommands("src", 0, ForkOptions{ID: "f"}, d.epoch)
	wantReason(r, CodeInvalid, "at_seq is required")
	_, _, _, r = st.ForkCommands("src", 9, ForkOptions{ID: "f"}, d.epoch)
	wantReason(r, CodeInvalid, "session src has no history entry 9: its entries go up to 8")
	_, _, _, r = st.ForkCommands("src", 2, ForkOptions{ID: "f"}, d.epoch)
	wantReason(r, CodeInvalid, "entry 2 is followed by entry 3, a tool result of the same model output")
	_, _, _, r = st.ForkCommands("src", 4, ForkOptions{ID: "f", Labels: lbl("Bad", "x")}, d.epoch)
	wantReason(r, CodeInvalid, `label key "Bad"`)
	_, _, _, r = st.ForkCommands("src", 4, ForkOptions{ID: "f", Agent: "bad agent"}, d.epoch)
	if r == nil || r.Code != CodeInvalid {
		t.Fatalf("a bad agent: %v", r)
	}

	// Apply refuses the same, and an id that is taken.
	d.refused(begin(4, "taken"), CodeAlreadyExists)
	self := begin(4, "f")
	self.GetForkSessionBegin().Session.Id = "src"
	wantReason(d.refused(self, CodeInvalid), CodeInvalid, "a fork of session src needs an id of its own")
	stale := begin(4, "f")
	stale.GetForkSessionBegin().Epoch = d.epoch - 1
	d.refused(stale, CodeFailedPrecondition)
	// The source changes between the leader's read and the apply: a turn
	// starts and reaches the fork point, or the source is deleted.
	d.createSession("empty", "", "")
	_, _, _, r = d.f.State().ForkCommands("empty", 1, ForkOptions{ID: "f"}, d.epoch)
	wantReason(r, CodeInvalid, "its history is empty")
	d.send("src", "more")
	in := begin(8, "f")
	in.GetForkSessionBegin().AtSeq, in.GetForkSessionBegin().Session.ForkedAtSeq, in.GetForkSessionBegin().Session.NextHistory = 9, 9, 10
	wantReason(d.refused(in, CodeFailedPrecondition), CodeFailedPrecondition,
		"entry 9 of session src is inside turn 3, which has not ended (the session is running): fork at an entry before 9, or once the turn ends")
	d.startNext("src", kRunModel).answer("", call("c9", "ask_user", `{"question":"?"}`))
	wantStatus(t, d.session("src"), sWaiting)
	_, _, _, r = d.f.State().ForkCommands("src", 10, ForkOptions{ID: "f"}, d.epoch)
	wantReason(r, CodeFailedPrecondition, "(the session is waiting)")
	// An entry before the turn forks while it runs or waits.
	d.fork("src", 8, ForkOptions{ID: "while-waiting"})
	if h := historyOf(d, "while-waiting"); len(h) != 8 {
		t.Fatalf("a fork of a waiting session before its turn has %d entries", len(h))
	}
	// The end of a fork refuses a missing placeholder.
	d.refused(forkEndCmd(&fsmpb.ForkSessionEnd{Epoch: d.epoch, SessionId: "nothing"}), CodeNotFound)
}

// A malformed Begin or End is refused for what it says, before any state
// is read, and changes nothing; an End refuses an import's placeholder and
// a latest summary its pages did not bring.
func TestFork_MalformedCommandsRefused(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "src", "", 2)
	good := func() *fsmpb.ForkSessionBegin {
		b, _, _, r := d.f.State().ForkCommands("src", 4, ForkOptions{ID: "f", Labels: lbl("a", "1", "b", "2")}, d.epoch)
		if r != nil {
			t.Fatal(r)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		edit func(b *fsmpb.ForkSessionBegin)
		want string
	}{
		{"no source", func(b *fsmpb.ForkSessionBegin) { b.SourceId = "" }, "source session id is required"},
		{"no header", func(b *fsmpb.ForkSessionBegin) { b.Session = nil }, "begins with the new session's header"},
		{"no id", func(b *fsmpb.ForkSessionBegin) { b.Session.Id = "" }, "session id is required"},
		{"another source", func(b *fsmpb.ForkSessionBegin) { b.Session.ForkedFrom = "other" }, "the header of fork f names other at 4"},
		{"counters", func(b *fsmpb.ForkSessionBegin) { b.Session.NextHistory = 9 }, "its header counts 4 entries going on at 9"},
		{"a turn", func(b *fsmpb.ForkSessionBegin) { b.Session.Turn = &fsmpb.Turn{Number: 1} }, "starts idle, with no turn"},
		{"rows", func(b *fsmpb.ForkSessionBegin) { b.Session.InboxCount = 1 }, "carries no rows"},
		{"summary past the copy", func(b *fsmpb.ForkSessionBegin) { b.Session.LatestSummarySeq = 5 }, "its compaction state names entry 5"},
		{"bad agent", func(b *fsmpb.ForkSessionBegin) { b.Session.Agent = "no agent" }, "agent"},
		{"bad label", func(b *fsmpb.ForkSessionBegin) { b.Session.Labels = lbl("A", "1") }, `label key "A"`},
		{"labels out of order", func(b *fsmpb.ForkSessionBegin) { b.Session.Labels = lbl("b", "2", "a", "1") }, "not in key order"},
	} {
		b := good()
		tc.edit(b)
		if r := d.refused(forkBeginCmd(b), CodeInvalid); !strings.Contains(r.Reason, tc.want) {
			t.Errorf("%s: %q; want %q", tc.name, r.Reason, tc.want)
		}
	}
	if r := d.refused(forkEndCmd(&fsmpb.ForkSessionEnd{Epoch: d.epoch, SessionId: "f", Message: "go"}), CodeInvalid); !strings.Contains(r.Reason, "message id") {
		t.Errorf("a message without an id: %q", r.Reason)
	}
	// An End on an import's placeholder.
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ImportSessionBegin{ImportSessionBegin: &fsmpb.ImportSessionBegin{Epoch: d.epoch, Session: &fsmpb.Session{
		Id: "imported", Status: fsmpb.SessionStatus_SESSION_STATUS_IDLE, NextStep: 1, NextHistory: 1, NextInbox: 1,
	}}}})
	if r := d.refused(forkEndCmd(&fsmpb.ForkSessionEnd{Epoch: d.epoch, SessionId: "imported"}), CodeInvalid); !strings.Contains(r.Reason, "being imported, not forked") {
		t.Errorf("an End on an import: %q", r.Reason)
	}
	// An End whose header names a summary the pages did not bring.
	b := good()
	b.Session.LatestSummarySeq = 2
	_, pages, end, _ := d.f.State().ForkCommands("src", 4, ForkOptions{ID: "f"}, d.epoch)
	d.do(forkBeginCmd(b))
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: pages[0]}})
	if r := d.refused(forkEndCmd(end), CodeInvalid); !strings.Contains(r.Reason, "names entry 2 as its latest summary") {
		t.Errorf("an End with a summary not brought: %q", r.Reason)
	}
}

// A fork's end checks that its pages came; until then the fork is hidden,
// and a new leader discards a fork it did not finish.
func TestFork_UnfinishedIsHiddenAndDiscardedByANewLeader(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "src", "", 1)
	begin, pages, end, r := d.f.State().ForkCommands("src", 4, ForkOptions{ID: "f"}, d.epoch)
	if r != nil {
		t.Fatal(r)
	}
	d.do(forkBeginCmd(begin))
	if d.f.State().Session("f") != nil || len(forksOf(d, "src")) != 0 {
		t.Fatal("a fork in progress is shown")
	}
	d.refused(forkEndCmd(end), CodeInvalid) // its pages have not come
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: pages[0]}})
	d.restart()
	if d.f.State().Session("f") != nil {
		t.Fatal("a fork cut by a change of leader was kept")
	}
	d.refused(forkEndCmd(&fsmpb.ForkSessionEnd{Epoch: d.epoch, SessionId: "f"}), CodeNotFound)
}

// A fork of more entries than a page holds comes in several pages, each
// bounded, and ends equal to the source's prefix.
func TestFork_LargeHistoryComesInBoundedPages(t *testing.T) {
	d := newDriver(t)
	turns := MaxImportRows/4 + 10
	finishedSession(d, "src", "", turns)
	at := uint64(4 * (turns - 1))
	pages := d.fork("src", at, ForkOptions{ID: "f"})
	if len(pages) < 2 {
		t.Fatalf("%d entries came in %d page(s)", at, len(pages))
	}
	for _, p := range pages {
		if len(p.History) > MaxImportRows {
			t.Fatalf("a page of %d entries", len(p.History))
		}
	}
	got, src := historyOf(d, "f"), historyOf(d, "src")
	if uint64(len(got)) != at || got[len(got)-1].CumSize != src[at-1].CumSize {
		t.Fatalf("fork of %d entries (size %d); want %d (size %d)", len(got), got[len(got)-1].CumSize, at, src[at-1].CumSize)
	}
}

// A fork applies the same on a twin fed the same log in batches, and
// survives a snapshot and restore with its link to the source.
func TestFork_DeterministicAndKeptBySnapshot(t *testing.T) {
	d := newDriver(t)
	d.twin, d.twinBatch = New(Options{}), 3
	var buf bytes.Buffer
	if err := d.f.Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if err := d.twin.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	finishedSession(d, "src", "", 3)
	d.fork("src", 8, ForkOptions{ID: "f1", Message: "again", MessageID: "f1/first"})
	d.fork("src", 4, ForkOptions{ID: "f2", Labels: lbl("k", "v")})
	d.flushTwin()
	if a, b := persist(t, d.f), persist(t, d.twin); !bytes.Equal(a, b) {
		t.Fatal("the twin fed the same log in batches ended in another state")
	}
	d.restart()
	f := d.session("f1")
	if f.ForkedFrom != "src" || f.ForkedAtSeq != 8 {
		t.Fatalf("after a restore the fork names %q at %d", f.ForkedFrom, f.ForkedAtSeq)
	}
	if got := forksOf(d, "src"); !slices.Equal(got, []string{"f1", "f2"}) {
		t.Fatalf("after a restore the forks of src listed: %v", got)
	}
}

// The fork's compaction state is the source's cut after at_seq: kept when
// the summary and its boundary are in the copy, else the whole copy.
func TestFork_CompactionStateOfTheCopy(t *testing.T) {
	d := newDriver(t)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "src", CompactionThreshold: 10}}})
	d.send("src", "first question, long enough")
	d.startNext("src", kRunModel).answer("first answer, long enough")
	d.send("src", "second question") // over the threshold: compacts first
	d.startNext("src", fsmpb.StepKind_STEP_KIND_COMPACT_CONTEXT).summary("summary of the first")
	d.startNext("src", kRunModel).answer("second answer")
	src := d.session("src")
	if src.LatestSummarySeq == 0 || src.CompactedBefore == 0 {
		t.Fatalf("the source did not compact: %v", src)
	}
	last := historyOf(d, "src")
	d.fork("src", last[len(last)-1].Seq, ForkOptions{ID: "whole"})
	if w := d.session("whole"); w.CompactedBefore != src.CompactedBefore || w.LatestSummarySeq != src.LatestSummarySeq || w.Summaries != 1 {
		t.Fatalf("a fork after the summary: boundary %d summary %d (%d); want %d %d", w.CompactedBefore, w.LatestSummarySeq, w.Summaries, src.CompactedBefore, src.LatestSummarySeq)
	}
	d.fork("src", 2, ForkOptions{ID: "early"})
	if e := d.session("early"); e.CompactedBefore != 0 || e.LatestSummarySeq != 0 || e.Summaries != 0 {
		t.Fatalf("a fork before the summary: boundary %d summary %d (%d)", e.CompactedBefore, e.LatestSummarySeq, e.Summaries)
	}
}
