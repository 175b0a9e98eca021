package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

func (d *driver) setFolding(keep uint64) {
	d.t.Helper()
	d.do(&fsmpb.Command{Body: &fsmpb.Command_SetTurnFolding{SetTurnFolding: &fsmpb.SetTurnFolding{Epoch: d.epoch, KeepTurnSteps: keep}}})
}

func (d *driver) foldCmd(maxSteps uint32, sessions ...string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_FoldTurns{FoldTurns: &fsmpb.FoldTurns{Epoch: d.epoch, SessionIds: sessions, MaxSteps: maxSteps}}}
}

// turnsOfSteps lists the turn of each of a session's Steps, in order.
func turnsOfSteps(st *State, id string) []uint64 {
	var out []uint64
	for _, s := range st.Steps(id) {
		out = append(out, s.Turn)
	}
	return out
}

func foldedOf(st *State, id string) []*fsmpb.FoldedTurn {
	out, _ := st.FoldedTurns(id, 0, 1<<30)
	return out
}

// Of a session of five finished turns (each: model, tool call, model) and
// one under way, with keep_turn_steps 2 only turns 1-3 fold: the last two
// finished turns and the turn in progress keep their Steps, and each folded
// turn keeps what its Steps were.
func TestFoldTurns_FoldsOnlyFinishedTurnsOlderThanTheKept(t *testing.T) {
	d := newDriver(t)
	d.setFolding(2)
	finishedSession(d, "s", "", 5)
	d.send("s", "turn 6")
	h := d.startNext("s", kRunModel) // turn 6 runs
	if got := d.f.State().FoldDue(10); len(got) != 1 || got[0] != "s" {
		t.Fatalf("sessions due a fold: %v; want [s]", got)
	}
	d.do(d.foldCmd(MaxFoldSteps, "s"))

	st := d.f.State()
	if got := turnsOfSteps(st, "s"); fmt.Sprint(got) != "[4 4 4 5 5 5 6]" {
		t.Fatalf("turns of the Steps kept: %v; want those of turns 4, 5 and 6", got)
	}
	folded := foldedOf(st, "s")
	if len(folded) != 3 {
		t.Fatalf("folded turns: %v; want 3", folded)
	}
	for i, f := range folded {
		first := uint64(3*i + 1)
		if f.Turn != uint64(i+1) || f.Steps != 3 || f.Attempts != 3 || f.FirstStep != first || f.LastStep != first+2 ||
			f.LastStatus != fsmpb.StepStatus_STEP_STATUS_DONE || f.LastOutcome != fsmpb.Outcome_OUTCOME_SUCCEEDED || f.FailedSteps != 0 {
			t.Fatalf("folded turn %d: %v", i+1, f)
		}
		if len(f.Kinds) != 2 || f.Kinds[0].Kind != kRunModel || f.Kinds[0].Steps != 2 || f.Kinds[0].Attempts != 2 ||
			f.Kinds[1].Kind != kCallTool || f.Kinds[1].Tool != "lookup" || f.Kinds[1].Steps != 1 {
			t.Fatalf("folded turn %d kinds: %v; want 2 RunModel and 1 lookup", i+1, f.Kinds)
		}
		if f.FirstAtMs == 0 || f.LastAtMs < f.FirstAtMs {
			t.Fatalf("folded turn %d times: %d..%d", i+1, f.FirstAtMs, f.LastAtMs)
		}
	}
	s := d.session("s")
	if s.FoldedThroughTurn != 3 || s.FoldedSteps != 9 {
		t.Fatalf("session counters: through %d, steps %d; want 3, 9", s.FoldedThroughTurn, s.FoldedSteps)
	}
	if got := st.FoldDue(10); len(got) != 0 {
		t.Fatalf("sessions due a fold after it: %v", got)
	}
	// The turn under way goes on as before; when it ends, one more turn is owed.
	h.claim().answer("done")
	if got := d.f.State().FoldDue(10); len(got) != 1 {
		t.Fatalf("after turn 6: sessions due %v; want [s]", got)
	}
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	if got := turnsOfSteps(d.f.State(), "s"); fmt.Sprint(got) != "[5 5 5 6]" {
		t.Fatalf("after turn 6, turns of the Steps kept: %v", got)
	}
}

// A fold is bounded by max_steps: a turn folded in part is taken up by the
// next command, and the rows end as one unbounded fold leaves them.
func TestFoldTurns_BoundedPerCommandAndEndsAsOneFold(t *testing.T) {
	whole, parts := newDriver(t), newDriver(t)
	for _, d := range []*driver{whole, parts} {
		d.setFolding(1)
		d.createSession("other", "", "")
		finishedSession(d, "s", "", 4)
	}
	whole.do(whole.foldCmd(MaxFoldSteps, "s"))
	commands := 0
	for len(parts.f.State().FoldDue(10)) > 0 {
		before := len(parts.f.State().Steps("s"))
		parts.do(parts.foldCmd(2, "other", "s"))
		if gone := before - len(parts.f.State().Steps("s")); gone > 2 {
			t.Fatalf("a fold of max_steps 2 folded %d Steps", gone)
		}
		if s := parts.session("s"); commands == 0 && (s.FoldedThroughTurn != 0 || s.FoldedSteps != 2) {
			t.Fatalf("after the first fold: through %d, steps %d; want turn 1 folded in part", s.FoldedThroughTurn, s.FoldedSteps)
		}
		if commands++; commands > 10 {
			t.Fatal("the fold does not end")
		}
	}
	a, b := foldedOf(whole.f.State(), "s"), foldedOf(parts.f.State(), "s")
	if len(a) != 3 || len(a) != len(b) {
		t.Fatalf("folded turns: one fold %d, in parts %d; want 3", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(mustMarshal(t, a[i]), mustMarshal(t, b[i])) {
			t.Fatalf("folded turn %d: one fold %v, in parts %v", i+1, a[i], b[i])
		}
	}
	sw, sp := whole.session("s"), parts.session("s")
	if sw.FoldedThroughTurn != sp.FoldedThroughTurn || sw.FoldedSteps != sp.FoldedSteps || sp.FoldedSteps != 9 || sp.FoldDueThrough != sw.FoldDueThrough {
		t.Fatalf("counters: one fold %d/%d/%d, in parts %d/%d/%d", sw.FoldedThroughTurn, sw.FoldedSteps, sw.FoldDueThrough, sp.FoldedThroughTurn, sp.FoldedSteps, sp.FoldDueThrough)
	}
}

// keep_turn_steps 0 (the default of a cluster from before folding) folds
// nothing, and a fold of a session with nothing owed changes nothing.
func TestFoldTurns_ZeroKeepsEveryStep(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "s", "", 3)
	before := d.stateBytes()
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("a fold with keep_turn_steps 0 changed the state")
	}
	if got := d.f.State().FoldDue(10); len(got) != 0 {
		t.Fatalf("sessions due with keep 0: %v", got)
	}
	d.setFolding(3)
	before = d.stateBytes()
	d.do(d.foldCmd(MaxFoldSteps, "s", "missing"))
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("a fold of a session keeping all its turns changed the state")
	}
}

func TestFoldTurns_BadOrStaleCommandsAreRefused(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "s", "", 3)
	d.setFolding(1)
	many := make([]string, MaxFoldSessions+1)
	for i := range many {
		many[i] = fmt.Sprintf("s%d", i)
	}
	for _, c := range []*fsmpb.Command{
		d.foldCmd(0, "s"),
		d.foldCmd(MaxFoldSteps+1, "s"),
		d.foldCmd(10),
		d.foldCmd(10, many...),
		d.foldCmd(10, ""),
	} {
		d.refused(c, CodeInvalid)
	}
	stale := d.foldCmd(10, "s")
	stale.GetFoldTurns().Epoch = d.epoch - 1
	d.refused(stale, CodeFailedPrecondition)
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_SetTurnFolding{SetTurnFolding: &fsmpb.SetTurnFolding{Epoch: d.epoch - 1, KeepTurnSteps: 5}}}, CodeFailedPrecondition)
}

// Deleting a session removes its folded turns with its other rows, bounded
// per purge.
func TestFoldTurns_PurgeRemovesFoldedTurns(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "s", "", 4)
	d.setFolding(1)
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	if n := rowsOf(d.f, "s")[store.TableFoldedTurns]; n != 3 {
		t.Fatalf("folded rows: %d; want 3", n)
	}
	d.do(deleteCmd("s"))
	if got := d.f.State().FoldDue(10); len(got) != 0 {
		t.Fatalf("a deleted session is due a fold: %v", got)
	}
	for range 100 {
		if d.f.State().tx.Session("s") == nil {
			break
		}
		d.do(d.purgeCmd("s", 2))
	}
	if rows := rowsOf(d.f, "s"); total(rows) != 0 {
		t.Fatalf("rows left after the purge: %v", rows)
	}
	for _, ts := range d.f.State().tx.TableSizes() {
		if ts.Table == store.TableFoldedTurns && (ts.Rows != 0 || ts.Bytes != 0) {
			t.Fatalf("folded turns table after the purge: %+v", ts)
		}
	}
}

// Folded turns, the counters and the index of sessions due a fold survive
// a snapshot and restore; the table's size is counted like any other.
func TestFoldTurns_SurviveSnapshotAndRestore(t *testing.T) {
	d := newDriver(t)
	d.setFolding(2)
	finishedSession(d, "s", "", 5)
	finishedSession(d, "t", "", 5)
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	want := foldedOf(d.f.State(), "s")
	d.restart()
	st := d.f.State()
	if got := foldedOf(st, "s"); len(got) != len(want) || !bytes.Equal(mustMarshal(t, got[0]), mustMarshal(t, want[0])) {
		t.Fatalf("folded turns after a restore: %v; want %v", got, want)
	}
	if got := st.KeepTurnSteps(); got != 2 {
		t.Fatalf("keep_turn_steps after a restore: %d", got)
	}
	if got := st.FoldDue(10); len(got) != 1 || got[0] != "t" {
		t.Fatalf("sessions due a fold after a restore: %v; want [t]", got)
	}
	recount := st.tx.RecountSizes()
	for i, ts := range st.tx.TableSizes() {
		if ts != recount[i] {
			t.Fatalf("table %s: kept size %+v, recounted %+v", ts.Table, ts, recount[i])
		}
		if ts.Table == store.TableFoldedTurns && ts.Rows != 3 {
			t.Fatalf("folded turns table: %+v; want 3 rows", ts)
		}
	}
}

func mustMarshal(t *testing.T, m *fsmpb.FoldedTurn) []byte {
	b, err := m.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A fold applies the same one by one as in a Batch entry and on a twin
// fed the same log: it reads no clock and no map order.
func TestFoldTurns_Deterministic(t *testing.T) {
	d := newDriver(t)
	d.twin, d.twinBatch = New(Options{}), 3
	var buf bytes.Buffer
	if err := d.f.Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if err := d.twin.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		finishedSession(d, fmt.Sprintf("s%d", i), "", 4+i)
	}
	d.setFolding(1)
	d.do(d.foldCmd(4, "s2", "s0", "s1"))
	d.do(d.foldCmd(MaxFoldSteps, "s1", "s2", "s0"))
	d.flushTwin()
	if a, b := persist(t, d.f), persist(t, d.twin); !bytes.Equal(a, b) {
		t.Fatal("the twin fed the same log in batches ended in another state")
	}
}

// The page of folded turns: in turn order, from a turn on, bounded.
func TestFoldedTurns_Paged(t *testing.T) {
	d := newDriver(t)
	finishedSession(d, "s", "", 6)
	d.setFolding(1)
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	st := d.f.State()
	page, next := st.FoldedTurns("s", 0, 2)
	if len(page) != 2 || page[0].Turn != 1 || page[1].Turn != 2 || next != 2 {
		t.Fatalf("first page: %v, next %d", page, next)
	}
	page, next = st.FoldedTurns("s", next, 10)
	if len(page) != 3 || page[0].Turn != 3 || next != 0 {
		t.Fatalf("last page: %v, next %d", page, next)
	}
}

// A Step that ended outcome_unknown waits for an operator to reconcile it
// by its id: its turn, and the turns after it, do not fold until then, and
// the session is not due a fold while it is its oldest Step.
func TestFoldTurns_AnUnreconciledStepHoldsTheFold(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "")
	d.send("s", "mail them")
	d.startNext("s", kRunModel).answer("", call("e1", "send_email", "{}"))
	d.startNext("s", kSingle).claim().expire() // it may have been sent
	unknown := d.latest("s", kSingle)
	if unknown.Outcome != oUnknown {
		t.Fatalf("the call ended %s; want outcome_unknown", OutcomeName(unknown.Outcome))
	}
	d.startNext("s", kRunModel).answer("I could not tell")
	for i := range 3 {
		d.send("s", fmt.Sprint("more ", i))
		d.startNext("s", kRunModel).answer("ok")
	}
	d.setFolding(1)
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	s := d.session("s")
	if s.FoldedThroughTurn != 0 || s.FoldedSteps != 1 || d.f.State().Step(unknown.Id) == nil {
		t.Fatalf("folded through %d, %d Steps; want only the RunModel before the unreconciled call", s.FoldedThroughTurn, s.FoldedSteps)
	}
	if got := d.f.State().FoldDue(10); len(got) != 0 {
		t.Fatalf("a session held by an unreconciled Step is due a fold: %v", got)
	}
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ReconcileOutcome{ReconcileOutcome: &fsmpb.ReconcileOutcome{StepId: unknown.Id, Outcome: oFailed}}})
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	s = d.session("s")
	if s.FoldedThroughTurn != 3 || d.f.State().Step(unknown.Id) != nil {
		t.Fatalf("after the reconcile: folded through %d; want 3", s.FoldedThroughTurn)
	}
	f := foldedOf(d.f.State(), "s")[0]
	if f.Steps != 3 || f.FailedSteps != 1 || len(f.Kinds) != 2 || f.Kinds[1].Kind != kSingle || f.Kinds[1].Tool != "send_email" {
		t.Fatalf("turn 1 folded as %v", f)
	}
}

// Sessions written before the setting was turned on (or lowered) are not
// in the index of sessions owed a fold: the leader's sweep reads every
// session a page at a time and finds them; a fold takes each out.
func TestFoldSweep_FindsSessionsWrittenBeforeTheSetting(t *testing.T) {
	d := newDriver(t)
	for _, id := range []string{"a", "b", "c"} {
		finishedSession(d, id, "", 4)
	}
	d.createSession("idle", "", "")
	d.setFolding(2)
	st := d.f.State()
	if got := st.FoldDue(10); len(got) != 0 {
		t.Fatalf("the index lists %v before any session was written under the setting", got)
	}
	var found []string
	after := ""
	for pages := 0; ; pages++ {
		ids, next := st.FoldSweep(after, 2)
		if len(ids) > 2 {
			t.Fatalf("a sweep page of 2 sessions gave %v", ids)
		}
		found = append(found, ids...)
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("the sweep does not end")
		}
		after = next
	}
	if fmt.Sprint(found) != "[a b c]" {
		t.Fatalf("the sweep found %v; want [a b c]", found)
	}
	d.do(d.foldCmd(MaxFoldSteps, found...))
	st = d.f.State()
	if ids, _ := st.FoldSweep("", 100); len(ids) != 0 {
		t.Fatalf("after the fold the sweep finds %v", ids)
	}
	for _, id := range found {
		if s := d.session(id); s.FoldedThroughTurn != 2 || s.FoldDueThrough != 0 {
			t.Fatalf("session %s: folded through %d, owed through %d; want 2 and none", id, s.FoldedThroughTurn, s.FoldDueThrough)
		}
	}
}

// A session in the index whose fold the setting no longer owes (it was
// raised or turned off since) leaves the index at its next fold, which
// folds nothing.
func TestFoldTurns_ASessionNoLongerOwedLeavesTheIndex(t *testing.T) {
	d := newDriver(t)
	d.setFolding(1)
	finishedSession(d, "s", "", 3)
	if got := d.f.State().FoldDue(10); len(got) != 1 {
		t.Fatalf("sessions owed a fold: %v; want [s]", got)
	}
	d.setFolding(0)
	d.do(d.foldCmd(MaxFoldSteps, "s"))
	if got := d.f.State().FoldDue(10); len(got) != 0 {
		t.Fatalf("sessions owed a fold with folding off: %v", got)
	}
	if s := d.session("s"); s.FoldedSteps != 0 || len(d.f.State().Steps("s")) != 9 {
		t.Fatalf("folding off folded %d Steps", s.FoldedSteps)
	}
}
