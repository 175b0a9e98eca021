package gc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

// finished creates a session that answered turns messages and is idle.
func finished(c *leasetest.Cluster, id string, turns int) {
	c.CreateSession(id, "")
	for i := range turns {
		c.Send(id, fmt.Sprintf("%s-%d", id, i), "hello")
		st := c.Queued(id)[0]
		c.Complete(leasetest.Ref(st.Id, c.Start(st.Id, "w")), "hi")
	}
}

func deleteSession(c *leasetest.Cluster, id string) {
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_DeleteSession{DeleteSession: &fsmpb.DeleteSession{SessionId: id}}})
}

func TestSessions_PurgeProposesBoundedCommandsUntilTheSessionIsGone(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	c.RegisterWorker("w", true)
	finished(c, "long", 20) // 20 Steps, 40 history rows, 20 accepted ids, ~120 events
	finished(c, "short", 1)
	finished(c, "kept", 2)
	deleteSession(c, "long")
	deleteSession(c, "short")
	g := NewSessions(c, c, SessionConfig{Batch: 50, Now: clk.Now}, nil)
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	purges := c.Proposals("PurgeSession")
	if len(purges) < 5 {
		t.Fatalf("%d PurgeSession proposed for over 200 rows at 50 a command", len(purges))
	}
	for _, p := range purges {
		if got := p.GetPurgeSession().MaxRows; got != 50 {
			t.Fatalf("a purge of %d rows; want the batch of 50", got)
		}
	}
	st := c.State()
	if got := st.DeletedSessions(10); len(got) != 0 {
		t.Fatalf("still owed a purge: %v", got)
	}
	if len(st.Steps("long")) != 0 || len(st.Events("long", 0)) != 0 || st.EventLog("long") != nil {
		t.Fatal("rows of the deleted session are left")
	}
	if st.Session("kept") == nil || len(st.Steps("kept")) != 2 {
		t.Fatal("the purge touched a session that was not deleted")
	}
	// Nothing owed: nothing proposed.
	before := c.Count("")
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if n := c.Count("") - before; n != 0 {
		t.Fatalf("%d commands proposed with nothing owed", n)
	}

	// A newer epoch fences the collector off.
	deleteSession(c, "kept")
	c.BumpEpoch()
	if err := g.collect(context.Background(), epoch); !errors.Is(err, errSessionsFenced) {
		t.Fatalf("a stale collector's purge: %v; want it fenced off", err)
	}
	if !c.State().IsDeleted("kept") || len(c.State().Steps("kept")) != 2 {
		t.Fatal("a stale purge removed rows")
	}
}

func TestSessions_RetentionDeletesOnlySessionsIdleLongerAndIsOffByDefault(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	c.RegisterWorker("w", true)
	for i := range 5 {
		finished(c, fmt.Sprintf("old%d", i), 1)
	}
	c.CreateSession("busy", "go") // running: never expired
	clk.now = clk.now.Add(2 * time.Hour)
	finished(c, "young", 1)

	off := NewSessions(c, c, SessionConfig{Now: clk.Now}, nil)
	if err := off.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if n := c.Count("ExpireSessions"); n != 0 {
		t.Fatalf("%d ExpireSessions proposed without a retention", n)
	}

	g := NewSessions(c, c, SessionConfig{Retention: time.Hour, Now: clk.Now}, nil)
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if n := c.Count("ExpireSessions"); n != 1 {
		t.Fatalf("%d ExpireSessions proposed; want 1 for 5 sessions", n)
	}
	st := c.State()
	var left []string
	for _, s := range st.Sessions() {
		left = append(left, s.Id)
	}
	if fmt.Sprint(left) != "[busy young]" {
		t.Fatalf("sessions kept: %v", left)
	}
	if got := st.DeletedSessions(10); len(got) != 0 {
		t.Fatalf("expired sessions not purged: %v", got)
	}
}

func TestSessions_EstablishAndRevokeStartAndStopTheCollector(t *testing.T) {
	c := leasetest.New(t)
	epoch := c.BumpEpoch()
	c.RegisterWorker("w", true)
	finished(c, "s", 3)
	deleteSession(c, "s")
	g := NewSessions(c, c, SessionConfig{Interval: time.Millisecond}, nil)
	if err := g.EstablishLeadership(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	leasetest.Eventually(t, "the deleted session is purged", func() bool { return !c.State().IsDeleted("s") })
	g.RevokeLeadership()
	c.Close() // a proposal after this fails the test
	g.RevokeLeadership()
}
