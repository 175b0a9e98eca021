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

// clock is a hand-moved clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestEvents_EstablishingPutsTheRetentionInForceOnce(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	g := NewEvents(c, c, EventConfig{Count: 5, Age: time.Hour, Now: clk.Now}, nil)
	if err := g.EstablishLeadership(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	g.RevokeLeadership()
	if got := c.State().EventRetention(); got.Count != 5 || got.AgeMs != time.Hour.Milliseconds() {
		t.Fatalf("retention in force: %v", got)
	}
	// The next leader with the same flags proposes nothing.
	epoch = c.BumpEpoch()
	if err := g.EstablishLeadership(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	g.RevokeLeadership()
	if n := c.Count("SetEventRetention"); n != 1 {
		t.Fatalf("%d SetEventRetention proposed; want 1", n)
	}
	// One from an older epoch is refused: establishing fails and is retried.
	g2 := NewEvents(c, c, EventConfig{Count: 7, Now: clk.Now}, nil)
	if err := g2.EstablishLeadership(context.Background(), epoch-1); err == nil {
		t.Fatal("a stale epoch established nothing, but no error was returned")
	}
	if got := c.State().EventRetention(); got.Count != 5 {
		t.Fatalf("a stale SetEventRetention changed the retention to %v", got)
	}
}

func TestEvents_PruneProposesBoundedCommandsUntilNothingIsOwed(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	for i := range 5 {
		c.CreateSession(fmt.Sprintf("s%d", i), "hi") // 4 events each
	}
	c.CreateSession("busy", "")
	for i := range 8 {
		c.Send("busy", fmt.Sprintf("m%d", i), "more") // 12 events in all
	}
	// The retention comes after the events: every session is over the count.
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_SetEventRetention{SetEventRetention: &fsmpb.SetEventRetention{
		Epoch: epoch, Retention: &fsmpb.EventRetention{Count: 3, AgeMs: time.Hour.Milliseconds()},
	}}})
	g := NewEvents(c, c, EventConfig{Count: 3, Age: time.Hour, Batch: 3, Now: clk.Now}, nil)
	prunes := func() int {
		before := c.Count("PruneEvents")
		if err := g.pruneAll(context.Background(), epoch, new(bool)); err != nil {
			t.Fatal(err)
		}
		return c.Count("PruneEvents") - before
	}
	// 5 + 9 events over the count, at most 3 per command.
	if n := prunes(); n != 5 {
		t.Fatalf("%d PruneEvents proposed; want 5", n)
	}
	st := c.State()
	for _, s := range st.Sessions() {
		if got := len(st.Events(s.Id, 0)); got != 3 {
			t.Fatalf("%s keeps %d events; want 3", s.Id, got)
		}
	}

	clk.now = clk.now.Add(2 * time.Hour)
	c.CreateSession("young", "")
	// 6 sessions * 3 old events, at most 3 per command.
	if n := prunes(); n != 6 {
		t.Fatalf("%d PruneEvents proposed; want 6", n)
	}
	st = c.State()
	for _, s := range st.Sessions() {
		want := 0
		if s.Id == "young" {
			want = 1
		}
		if got := len(st.Events(s.Id, 0)); got != want {
			t.Fatalf("%s keeps %d events; want %d", s.Id, got, want)
		}
	}
	if n := prunes(); n != 0 {
		t.Fatalf("%d PruneEvents proposed with nothing owed", n)
	}

	// A newer epoch fences the collector off.
	c.BumpEpoch()
	clk.now = clk.now.Add(2 * time.Hour)
	if err := g.pruneAll(context.Background(), epoch, new(bool)); !errors.Is(err, errFenced) {
		t.Fatalf("a stale collector's prune: %v; want it fenced off", err)
	}
	if got := len(c.State().Events("young", 0)); got != 1 {
		t.Fatal("a stale prune dropped events")
	}
}
