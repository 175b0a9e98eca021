package lease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/leasetest"
)

const ttl, toolWait = 100 * time.Millisecond, 200 * time.Millisecond

func newWorkersFixture(t *testing.T) (*leasetest.Cluster, *leasetest.Clock, *lease.Workers) {
	c := leasetest.New(t)
	clock := leasetest.NewClock()
	c.Now = clock.Now
	c.RegisterWorker("w1", true, leasetest.Lookup)
	c.RegisterWorker("w2", false, leasetest.SaveNote)
	c.BumpEpoch()
	w := lease.NewWorkers(c, c, nil, lease.WorkersConfig{TTL: ttl, ToolWait: toolWait, Now: clock.Now}, zaptest.NewLogger(t))
	t.Cleanup(w.RevokeLeadership)
	return c, clock, w
}

func TestWorkers_ASilentWorkerIsDeregisteredAndAPollingOneIsNot(t *testing.T) {
	c, clock, w := newWorkersFixture(t)
	if err := w.EstablishLeadership(context.Background(), c.Epoch()); err != nil {
		t.Fatal(err)
	}
	done := w.Polling("w2") // an open long poll keeps w2 alive
	defer done()
	clock.Advance(2 * ttl)
	leasetest.Eventually(t, "w1 is deregistered", func() bool { return c.State().Worker("w1") == nil })
	if c.State().Worker("w2") == nil {
		t.Fatal("w2 was deregistered while its poll was open")
	}
	if c.State().Tool("lookup") != nil {
		t.Fatal("lookup stays in the catalog without a Worker")
	}
}

func TestWorkers_AQueuedStepOfAnUnservedToolFailsAfterTheToolWait(t *testing.T) {
	c, clock, w := newWorkersFixture(t)
	c.CreateSession("s", "hi")
	st := c.Queued("s")[0]
	c.Complete(leasetest.Ref(st.Id, c.Start(st.Id, "w1")), "", leasetest.Call("n", "save_note", "{}"))
	if err := w.EstablishLeadership(context.Background(), c.Epoch()); err != nil {
		t.Fatal(err)
	}
	w.Touch("w1")
	clock.Advance(2 * ttl) // w2, which serves save_note, stays silent
	leasetest.Eventually(t, "w2 is deregistered", func() bool { return c.State().Worker("w2") == nil })
	// The service sees the tool go on a later look: the clock moves on
	// until it has waited the tool wait since then.
	leasetest.Eventually(t, "the save_note step fails", func() bool {
		clock.Advance(toolWait / 10)
		return len(c.State().QueuedStepsOfTool("save_note")) == 0
	})
	var note *fsmpb.Step
	for _, s := range c.State().Steps("s") {
		if s.Tool == "save_note" {
			note = s
		}
	}
	if note.Outcome != fsmpb.Outcome_OUTCOME_FAILED || !strings.HasPrefix(note.Result, fsm.NotRunPrefix) || !strings.Contains(note.Result, "unknown tool") {
		t.Fatalf("save_note: %s %q", fsm.OutcomeName(note.Outcome), note.Result)
	}
}

func TestWorkers_ADeposedLeaderDeregistersNobody(t *testing.T) {
	c, clock, w := newWorkersFixture(t)
	if err := w.EstablishLeadership(context.Background(), c.Epoch()); err != nil {
		t.Fatal(err)
	}
	w.RevokeLeadership()
	clock.Advance(2 * ttl)
	w.Touch("w1") // ignored: not established
	if c.State().Worker("w1") == nil || c.State().Worker("w2") == nil {
		t.Fatal("a revoked service deregistered a Worker")
	}
}
