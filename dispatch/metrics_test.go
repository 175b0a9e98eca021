package dispatch

import (
	"testing"
	"time"

	"github.com/dexhq/dex/lease/leasetest"
)

func (f *brokerFixture) gauges() Gauges {
	f.t.Helper()
	g, ok := f.b.Gauges()
	if !ok {
		f.t.Fatal("a running broker reported no gauges")
	}
	return g
}

func depthOf(g Gauges, model bool, tool string) int {
	for _, q := range g.Queues {
		if q.Model == model && q.Tool == tool {
			return q.Ready
		}
	}
	return 0
}

func TestBrokerGaugesFollowQueuesAndTimers(t *testing.T) {
	f := newBrokerFixture(t, func(c *leasetest.Cluster, _ *leasetest.Clock) {
		toolTurn(t, c, "s1", 3)
		c.CreateSession("s2", "go")
		modelTurn(t, c, "s3", leasetest.Call("c1", "sleep", `{"seconds": 60}`))
	})
	g := f.gauges()
	if d := depthOf(g, false, "lookup"); d != 3 {
		t.Fatalf("lookup queue depth %d; want 3 (%+v)", d, g)
	}
	if d := depthOf(g, true, ""); d != 1 {
		t.Fatalf("model queue depth %d; want 1 (%+v)", d, g)
	}
	if g.TimersPending != 1 {
		t.Fatalf("%d timers pending; want 1", g.TimersPending)
	}

	// Taken Steps leave the queue; a due timer stays pending until it fires.
	f.take(lookupKeys, 2)
	f.clock.Advance(2 * time.Minute)
	f.promote()
	g = f.gauges()
	if d := depthOf(g, false, "lookup"); d != 1 {
		t.Fatalf("after taking 2, lookup queue depth %d; want 1", d)
	}
	if g.TimersPending != 1 || len(f.owed()) != 1 {
		t.Fatalf("a due, unfired timer: %d pending, owed %v; want 1 pending", g.TimersPending, f.owed())
	}

	f.b.Stop()
	if _, ok := f.b.Gauges(); ok {
		t.Fatal("a stopped broker still reports gauges")
	}
}
