package lease_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/leasetest"
)

// A session whose agent no live Worker serves fails its turn after the tool
// wait, naming the agent; the default agent's and a served agent's Steps
// keep waiting.
func TestWorkers_AModelStepOfAnUnservedAgentFailsAfterTheToolWait(t *testing.T) {
	c := leasetest.New(t)
	clock := leasetest.NewClock()
	c.Now = clock.Now
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "m1", RunsModel: true, Agents: []string{"bot@1"}}}})
	c.BumpEpoch()
	for id, agent := range map[string]string{"plain": "", "one": "bot@1", "nine": "bot@9"} {
		c.Do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id, Agent: agent, MessageId: id + "-m", Message: "hi"}}})
	}
	// The broker's ready queues, as it would list them.
	queues := fixedQueues{{Model: true}, {Model: true, Agent: "bot@1"}, {Model: true, Agent: "bot@9"}}
	w := lease.NewWorkers(c, c, queues, lease.WorkersConfig{TTL: ttl, ToolWait: toolWait, Now: clock.Now}, zaptest.NewLogger(t))
	t.Cleanup(w.RevokeLeadership)
	if err := w.EstablishLeadership(context.Background(), c.Epoch()); err != nil {
		t.Fatal(err)
	}
	done := w.Polling("m1")
	defer done()
	leasetest.Eventually(t, "bot@9's RunModel fails", func() bool {
		clock.Advance(toolWait / 10)
		return len(c.Queued("nine")) == 0
	})
	s := c.State().Session("nine")
	if s.Status != fsmpb.SessionStatus_SESSION_STATUS_ERRORED || !strings.Contains(s.LastError, `agent "bot@9"`) {
		t.Fatalf("session of bot@9 is %s with last error %q", s.Status, s.LastError)
	}
	for _, id := range []string{"plain", "one"} {
		if len(c.Queued(id)) != 1 {
			t.Fatalf("session %s's RunModel no longer waits", id)
		}
	}
}

// fixedQueues are the broker's ready queues as a test sets them.
type fixedQueues []lease.ReadyQueue

func (q fixedQueues) ReadyQueues() []lease.ReadyQueue { return q }
