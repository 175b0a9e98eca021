package lease_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/leasetest"
)

// Without a tool wait (the default), a queued Step that no live Worker
// serves waits for ever, saying why: a tool whose last Worker went, and a
// model Step of an agent no Worker runs. When a Worker comes it runs as
// attempt 1.
func TestWorkers_WithoutAToolWaitAnUnservedStepWaitsForItsWorker(t *testing.T) {
	c := leasetest.New(t)
	clock := leasetest.NewClock()
	c.Now = clock.Now
	c.RegisterWorker("w1", true, leasetest.Lookup)
	c.RegisterWorker("w2", false, leasetest.SaveNote)
	c.BumpEpoch()
	c.CreateSession("s", "hi")
	st := c.Queued("s")[0]
	c.Complete(leasetest.Ref(st.Id, c.Start(st.Id, "w1")), "", leasetest.Call("n", "save_note", "{}"))
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "nine", Agent: "bot@9", MessageId: "nine-m", Message: "hi"}}})
	queues := fixedQueues{{Model: true, Agent: "bot@9"}}
	w := lease.NewWorkers(c, c, queues, lease.WorkersConfig{TTL: ttl, Now: clock.Now}, zaptest.NewLogger(t))
	t.Cleanup(w.RevokeLeadership)
	if err := w.EstablishLeadership(context.Background(), c.Epoch()); err != nil {
		t.Fatal(err)
	}
	done := w.Polling("w1") // w1 stays; w2, which serves save_note, goes
	defer done()
	leasetest.Eventually(t, "w2 is deregistered", func() bool {
		clock.Advance(ttl / 10)
		return c.State().Worker("w2") == nil
	})
	// Days go by. Each silent Worker deregistered is a look of the service
	// after the clock moved on; the second one's look comes after every
	// proposal of the first one's.
	for i := range 2 {
		id := fmt.Sprintf("silent%d", i)
		c.RegisterWorker(id, false)
		leasetest.Eventually(t, id+" is deregistered", func() bool {
			clock.Advance(24 * time.Hour)
			return c.State().Worker(id) == nil
		})
	}
	if n := c.Count("FailUnservedStep"); n != 0 {
		t.Fatalf("%d FailUnservedStep proposed without a tool wait", n)
	}
	note := c.Queued("s")
	if len(note) != 1 || note[0].Tool != "save_note" {
		t.Fatalf("queued Steps of s: %v; want the save_note Step", note)
	}
	if why := c.State().WaitingReason(note[0]); !strings.Contains(why, `no live Worker serves tool "save_note"`) {
		t.Fatalf("waiting reason %q", why)
	}
	model := c.Queued("nine")
	if len(model) != 1 || !strings.Contains(c.State().WaitingReason(model[0]), `agent "bot@9"`) {
		t.Fatalf("bot@9's RunModel: %v, waiting reason %q", model, c.State().WaitingReason(model[0]))
	}
	// A Worker for save_note comes: the Step runs as its first attempt.
	c.RegisterWorker("w3", false, leasetest.SaveNote)
	if at := c.Start(note[0].Id, "w3"); at.N != 1 {
		t.Fatalf("the waiting Step started as attempt %d; want 1", at.N)
	}
}
