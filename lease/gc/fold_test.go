package gc

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/lease/leasetest"
)

// members answers MembersApply as if every member recorded version.
type members struct{ version atomic.Uint32 }

func (m *members) MembersApply(v uint32) bool { return m.version.Load() >= v }

// runTurns runs n one-Step turns of a session.
func runTurns(c *leasetest.Cluster, session string, n int) {
	for range n {
		c.Send(session, fmt.Sprintf("%s-m%d", session, c.State().Session(session).NextTurn), "go on")
		st := c.Queued(session)[0]
		c.Complete(leasetest.Ref(st.Id, c.Start(st.Id, "w1")), "done")
	}
}

// While a member applies only log version 2 the service proposes neither
// SetTurnFolding nor FoldTurns; once all apply 3 it puts its setting in
// force and folds, bounded per command, the sessions over it only: those
// written before the setting its sweep finds, and a session that goes on
// the index of those owed a fold.
func TestFolds_GatedOnLogVersionThenFoldsOnlyWhatIsOwed(t *testing.T) {
	c := leasetest.New(t)
	clk := leasetest.NewClock()
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	c.RegisterWorker("w1", true)
	c.CreateSession("long", "")
	runTurns(c, "long", 8)
	c.CreateSession("short", "")
	runTurns(c, "short", 3)
	m := &members{}
	m.version.Store(fsm.BatchLogVersion)
	f := NewFolds(c, c, m, FoldConfig{Keep: 3, Batch: 2, Now: clk.Now}, nil)
	waiting := false
	for range 3 { // rounds while a member is older
		if err := f.round(context.Background(), epoch, &waiting); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Count("SetTurnFolding") + c.Count("FoldTurns"); n != 0 || !waiting {
		t.Fatalf("%d folding commands proposed while a member applies log version 2", n)
	}
	m.version.Store(fsm.FoldLogVersion)
	if err := f.round(context.Background(), epoch, &waiting); err != nil {
		t.Fatal(err)
	}
	if s := c.State().Session("long"); s.FoldedThroughTurn != 5 || s.FoldedSteps != 5 {
		t.Fatalf("the long session folded through turn %d (%d Steps); want 5 (5)", s.FoldedThroughTurn, s.FoldedSteps)
	}
	if got := c.State().KeepTurnSteps(); got != 3 {
		t.Fatalf("keep_turn_steps in force: %d; want 3", got)
	}
	if n := c.Count("SetTurnFolding"); n != 1 {
		t.Fatalf("%d SetTurnFolding proposed; want 1", n)
	}
	if n := len(c.State().Steps("long")); n != 3 {
		t.Fatalf("the long session keeps %d Steps; want those of its last 3 turns", n)
	}
	if s := c.State().Session("short"); s.FoldedSteps != 0 || len(c.State().Steps("short")) != 3 {
		t.Fatalf("the short session was folded: %v", s)
	}
	for _, cmd := range c.Proposals("FoldTurns") {
		body := cmd.GetFoldTurns()
		if body.MaxSteps != 2 || len(body.SessionIds) != 1 || body.SessionIds[0] != "long" {
			t.Fatalf("a FoldTurns of %v; want the long session, 2 Steps at most", body)
		}
	}
	if n := c.Count("FoldTurns"); n < 3 {
		t.Fatalf("%d FoldTurns folded 5 Steps 2 at a time", n)
	}
	// Now written under the setting: its next turn puts it on the index.
	runTurns(c, "short", 1)
	if got := c.State().FoldDue(10); len(got) != 1 || got[0] != "short" {
		t.Fatalf("sessions owed a fold: %v; want [short]", got)
	}
	if err := f.round(context.Background(), epoch, &waiting); err != nil {
		t.Fatal(err)
	}
	if s := c.State().Session("short"); s.FoldedThroughTurn != 1 || len(c.State().FoldDue(10)) != 0 {
		t.Fatalf("the short session folded through turn %d; want 1", s.FoldedThroughTurn)
	}
	// A new leader with the same flag sweeps the sessions again and
	// proposes no setting and nothing to fold.
	before := c.Count("FoldTurns")
	epoch = c.BumpEpoch()
	f.sweepAfter, f.swept = "", false
	if err := f.foldAll(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if c.Count("SetTurnFolding") != 1 || c.Count("FoldTurns") != before {
		t.Fatal("a leader with nothing owed proposed a folding command")
	}
}

// A fold of a deposed leader is refused: the service says so and stops.
func TestFolds_AStaleEpochIsRefused(t *testing.T) {
	c := leasetest.New(t)
	epoch := c.BumpEpoch()
	c.BumpEpoch()
	f := NewFolds(c, c, &members{}, FoldConfig{Keep: 2}, nil)
	if err := f.foldAll(context.Background(), epoch); err == nil {
		t.Fatal("a stale SetTurnFolding was not refused")
	}
	if got := c.State().KeepTurnSteps(); got != 0 {
		t.Fatalf("a stale SetTurnFolding set keep_turn_steps to %d", got)
	}
}
