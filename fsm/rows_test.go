package fsm

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// testdata/snapshot-v1.bin was written by the format-1 build: session "a"
// answered one message through a lookup, then got "second" (its turn
// queued); child "b" has a turn running and one message in its inbox.
func TestSnapshot_FormatOneStillRestores(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	f := New(Options{})
	if err := f.Restore(bytes.NewReader(old)); err != nil {
		t.Fatalf("a format-1 snapshot does not restore: %v", err)
	}
	st := f.State()
	a := st.SessionView("a")
	var kinds []string
	for _, e := range a.History {
		kinds = append(kinds, strings.TrimPrefix(e.Kind.String(), "HISTORY_KIND_")+":"+e.Text)
	}
	want := "USER:hello ASSISTANT:looking TOOL_RESULT:found ASSISTANT:done USER:second"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("history of a after restore: %s; want %s", got, want)
	}
	b := st.SessionView("b")
	if len(b.Inbox) != 1 || b.Inbox[0].Text != "queued behind the turn" || b.InboxCount != 1 {
		t.Fatalf("inbox of b after restore: %v (count %d)", b.Inbox, b.InboxCount)
	}
	// Its events were written as dex.v1.Event records; the state stores
	// fsmpb.Event now, under the same field numbers.
	evs := st.Events("a", 0)
	if len(evs) == 0 || evs[0].SessionId != "a" || evs[0].Type == "" || evs[0].Seq == 0 || evs[0].AtMs == 0 {
		t.Fatalf("events of a after restore: %v", evs)
	}
	for _, s := range st.Sessions() {
		checkRunningFigures(t, st, s)
		if len(s.History)+len(s.Inbox)+len(s.SeenMessageIds) > 0 {
			t.Fatalf("session %s still carries rows inline", s.Id)
		}
	}

	// The restored state goes on as any other: a repeated message id is a
	// replay, and it persists as format 2.
	d := &driver{t: t, f: f, index: st.Meta().AppliedIndex, now: 1767225601000, epoch: st.Meta().Epoch}
	res := d.do(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "b", MessageId: "b-m0", Text: "again"}}})
	if !res.Replayed {
		t.Fatal("a message id accepted before the upgrade was accepted again")
	}
	snap := persist(t, f)
	if snap[len(snapshotMagic)] != snapshotVersion {
		t.Fatalf("persisted as format %d; want %d", snap[len(snapshotMagic)], snapshotVersion)
	}
	g := New(Options{})
	if err := g.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, persist(t, g)) {
		t.Fatal("format 2 does not restore to the same bytes")
	}
}

// A session of 2,000 turns: its header stays the same size, a turn's Step
// carries the compacted history only, and sizes kept agree with the rows.
func TestLongSession_HeaderAndModelInputStayBounded(t *testing.T) {
	d := newDriver(t)
	const threshold = 64 << 10
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "long", CompactionThreshold: threshold}}})
	msg := strings.Repeat("m", 512)
	var headerAt10 int
	maxInput := uint64(0)
	for turn := 1; turn <= 2000; turn++ {
		d.send("long", msg)
		if st := d.f.State(); st.Session("long").Turn.StepId != "" {
			if cur := st.Step(st.Session("long").Turn.StepId); cur.Kind == kCompact {
				d.start(cur).claim().summary("summary of the turns so far")
			}
		}
		d.startNext("long", kRunModel).answer(strings.Repeat("a", 512))
		st := d.f.State()
		s := st.Session("long")
		maxInput = max(maxInput, modelInputSize(st.tx, s))
		if turn == 10 {
			headerAt10 = proto.Size(s)
		}
	}
	st := d.f.State()
	s := st.Session("long")
	if s.HistoryCount < 4000 {
		t.Fatalf("history holds %d entries; want 4,000 and more", s.HistoryCount)
	}
	if got := proto.Size(s); got > headerAt10+64 {
		t.Fatalf("the session header grew from %d bytes at turn 10 to %d at turn 2,000", headerAt10, got)
	}
	// The model is sent at most the threshold plus one turn and a summary.
	if maxInput > threshold+4096 {
		t.Fatalf("model input reached %d characters; the threshold is %d", maxInput, threshold)
	}
	sent := 0
	for _, e := range st.ModelHistory(s) {
		sent += int(store.EntrySize(e))
	}
	if uint64(sent) != modelInputSize(st.tx, s) {
		t.Fatalf("the model is sent %d characters; the kept size says %d", sent, modelInputSize(st.tx, s))
	}
	checkRunningFigures(t, st, s)
}

func TestModelInput_OverTheLimitFailsTheTurnWithContextLength(t *testing.T) {
	d := newDriver(t)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s", MaxModelInput: 1000}}})
	d.send("s", strings.Repeat("x", 400))
	d.startNext("s", kRunModel).answer("ok")
	d.send("s", strings.Repeat("y", 700))
	s := d.session("s")
	wantStatus(t, s, sErrored)
	if s.LastErrorType != fsmpb.ErrorType_ERROR_TYPE_CONTEXT_LENGTH || !strings.Contains(s.LastError, "over this session's limit of 1000") {
		t.Fatalf("last error %s %q; want context_length naming the limit", s.LastErrorType, s.LastError)
	}
	model := d.latest("s", kRunModel)
	if model.Status != fsmpb.StepStatus_STEP_STATUS_DONE || len(model.Attempts) != 0 {
		t.Fatalf("the RunModel Step is %s with %d attempts; want done with none (no Worker was handed it)", model.Status, len(model.Attempts))
	}
	// The messages were consumed: a small one is answered again.
	d.do(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: "s", TruncateFromSeq: 3}}})
	d.send("s", "short")
	d.startNext("s", kRunModel).answer("fine")
	wantStatus(t, d.session("s"), sIdle)
}

func TestPages_HistoryStepsAndSessionsReadInBoundedPages(t *testing.T) {
	d := newDriver(t)
	for i := range 25 {
		d.createSession(fmt.Sprintf("p%02d", i), "", "")
	}
	d.createSession("s", "", "first")
	for i := range 30 {
		d.startNext("s", kRunModel).answer(fmt.Sprintf("answer %d", i))
		d.send("s", fmt.Sprintf("message %d", i))
	}
	st := d.f.State()
	all, _ := st.History("s", 0, math.MaxInt, math.MaxInt)
	var paged []*fsmpb.HistoryEntry
	for after := uint64(0); ; {
		page, next := st.History("s", after, 7, math.MaxInt)
		paged = append(paged, page...)
		if next == 0 {
			break
		}
		if len(page) != 7 {
			t.Fatalf("a page before the last holds %d entries; want 7", len(page))
		}
		after = next
	}
	if len(paged) != len(all) || len(all) != 61 {
		t.Fatalf("pages hold %d entries, a whole read %d; want 61", len(paged), len(all))
	}
	for i := range all {
		if paged[i].Seq != all[i].Seq {
			t.Fatalf("entry %d: paged seq %d, whole seq %d", i, paged[i].Seq, all[i].Seq)
		}
	}
	// A byte budget cuts a page short, but never below one entry.
	if page, next := st.History("s", 0, 100, 1); len(page) != 1 || next != page[0].Seq {
		t.Fatalf("a 1-byte page holds %d entries (next %d); want 1", len(page), next)
	}
	steps, next := st.StepsPage("s", 0, 10, math.MaxInt)
	if len(steps) != 10 || steps[0].Number != 1 || steps[9].Number != 10 || next != 10 {
		t.Fatalf("first Steps page: %d Steps, next %d", len(steps), next)
	}
	rest, next := st.StepsPage("s", 10, 100, math.MaxInt)
	if len(rest) != 21 || next != 0 {
		t.Fatalf("last Steps page: %d Steps, next %d; want 21 and 0", len(rest), next)
	}
	var ids []string
	for token := ""; ; {
		page, next := st.SessionsPage(token, 10)
		for _, s := range page {
			ids = append(ids, s.Id)
		}
		if next == "" {
			break
		}
		token = next
	}
	if len(ids) != 26 || ids[0] != "p00" || ids[25] != "s" {
		t.Fatalf("sessions read in pages: %v", ids)
	}
}

func TestEditHistory_TruncationKeepsTheRunningFigures(t *testing.T) {
	d := newDriver(t)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s", CompactionThreshold: 10}}})
	d.send("s", "one two three")
	d.startNext("s", kRunModel).answer("first answer")
	d.send("s", "four five six")
	d.startNext("s", kCompact).claim().summary("the summary")
	d.startNext("s", kRunModel).answer("second answer")
	s := d.session("s")
	if s.LatestSummarySeq == 0 || s.CompactedBefore == 0 {
		t.Fatalf("no compaction happened (summary %d, boundary %d)", s.LatestSummarySeq, s.CompactedBefore)
	}
	d.do(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: "s", TruncateFromSeq: s.LatestSummarySeq}}})
	s = d.session("s")
	if s.LatestSummarySeq != 0 || s.CompactedBefore != 0 {
		t.Fatalf("after cutting the summary: summary %d, boundary %d; want 0 and 0", s.LatestSummarySeq, s.CompactedBefore)
	}
	checkRunningFigures(t, d.f.State(), d.f.State().Session("s"))
	if got := len(d.f.State().ModelHistory(d.f.State().Session("s"))); got != int(s.HistoryCount) {
		t.Fatalf("the model is sent %d entries; the history holds %d", got, s.HistoryCount)
	}
}
