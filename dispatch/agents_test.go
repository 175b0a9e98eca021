package dispatch

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

func agentSession(c *leasetest.Cluster, id, agent string) {
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: id, Agent: agent, MessageId: id + "-m0", Message: "go",
	}}})
}

func registerAgentWorker(c *leasetest.Cluster, id string, agents []string, tools ...*fsmpb.ToolSpec) {
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: id, Tools: tools, RunsModel: len(agents) > 0, Agents: agents,
	}}})
}

func lookupFor(agents ...string) *fsmpb.ToolSpec {
	t := proto.Clone(leasetest.Lookup).(*fsmpb.ToolSpec)
	t.Agents = agents
	return t
}

// takeAs polls the broker as a registered Worker would (its interests from
// its registration).
func (f *brokerFixture) takeAs(worker string, max int) []*fsmpb.Step {
	f.t.Helper()
	w := f.c.State().Worker(worker)
	if w == nil {
		f.t.Fatalf("worker %s is not registered", worker)
	}
	steps, _, err := f.b.takeFor(worker, workerKeys(w), max, nil, false)
	if err != nil {
		f.t.Fatalf("take as %s: %v", worker, err)
	}
	for _, s := range steps {
		f.b.release(s.Id)
	}
	return steps
}

func TestBrokerAgents_TwoAgentsModelQueuesNeverCross(t *testing.T) {
	f := newBrokerFixture(t, func(c *leasetest.Cluster, _ *leasetest.Clock) {
		registerAgentWorker(c, "bot1", []string{"bot@1"})
		registerAgentWorker(c, "bot2", []string{"bot@2"})
		registerAgentWorker(c, "bare", []string{"bot"})
	})
	agentSession(f.c, "a", "bot@1")
	agentSession(f.c, "b", "bot@2")
	f.c.CreateSession("d", "go") // the default agent
	for worker, want := range map[string]string{"bot1": "a", "bot2": "b", "model": "d"} {
		got := f.takeAs(worker, 10)
		if len(got) != 1 || got[0].SessionId != want {
			t.Errorf("%s took %v; want only session %s's RunModel", worker, sessionsOf(got), want)
		}
		for _, s := range got {
			if !Takes(f.c.State().Worker(worker), s) {
				t.Errorf("Takes(%s, %s) is false for a Step the broker gave it", worker, s.Id)
			}
		}
	}
	// A name without the version is another agent: exact match only.
	if got := f.takeAs("bare", 10); len(got) != 0 {
		t.Fatalf("a Worker of agent bot took %v", sessionsOf(got))
	}
	if Takes(f.c.State().Worker("bot2"), f.c.Queued("a")[0]) {
		t.Fatal("Takes lets a Worker of bot@2 run bot@1's RunModel")
	}
}

func TestBrokerAgents_AToolForEveryAgentOrForSome(t *testing.T) {
	f := newBrokerFixture(t, func(c *leasetest.Cluster, _ *leasetest.Clock) {
		registerAgentWorker(c, "models", []string{"bot@1", "bot@2"})
		registerAgentWorker(c, "some", nil, lookupFor("bot@1"))
	})
	for _, s := range []struct{ id, agent string }{{"a", "bot@1"}, {"b", "bot@2"}} {
		agentSession(f.c, s.id, s.agent)
		st := f.c.Queued(s.id)[0]
		f.c.Complete(leasetest.Ref(st.Id, f.c.Start(st.Id, "models")), "", leasetest.Call(s.id+"-l", "lookup", "{}"))
	}
	if got := f.takeAs("some", 10); len(got) != 1 || got[0].SessionId != "a" {
		t.Fatalf("the Worker serving lookup for bot@1 took %v; want only a's", sessionsOf(got))
	}
	if got := f.takeAs("w1", 10); len(got) != 2 { // w1 serves lookup for every agent
		t.Fatalf("the Worker serving lookup for every agent took %v; want both", sessionsOf(got))
	}
}

func TestBrokerAgents_APollForEveryAgentWakesOnANewAgentsStep(t *testing.T) {
	f := newBrokerFixture(t, func(c *leasetest.Cluster, _ *leasetest.Clock) {
		registerAgentWorker(c, "models", []string{"bot@7"})
	})
	_, w, err := f.b.takeFor("w1", workerKeys(f.c.State().Worker("w1")), 1, nil, true)
	if err != nil || w == nil {
		t.Fatalf("w1 did not wait: %v", err)
	}
	defer f.b.drop(w)
	agentSession(f.c, "s", "bot@7")
	st := f.c.Queued("s")[0]
	if closed(w.ch) {
		t.Fatal("a lookup poll was woken by a RunModel")
	}
	f.c.Complete(leasetest.Ref(st.Id, f.c.Start(st.Id, "models")), "", leasetest.Call("l", "lookup", "{}"))
	if !closed(w.ch) {
		t.Fatal("the poll serving lookup for every agent was not woken by bot@7's lookup Step")
	}
	f.b.mu.Lock()
	n := len(f.b.wild)
	f.b.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d tools keep waiters after the wake", n)
	}
}

// A poll looks only at the queues its Worker serves, however many other
// agents have ready Steps.
func TestBrokerAgents_APollDoesNotVisitOtherAgentsQueues(t *testing.T) {
	const others = 200
	f := newBrokerFixture(t, func(c *leasetest.Cluster, _ *leasetest.Clock) {
		registerAgentWorker(c, "models", []string{"bot@1"})
		registerAgentWorker(c, "some", nil, lookupFor("bot@1"))
	})
	for i := range others {
		agentSession(f.c, fmt.Sprintf("o%d", i), fmt.Sprintf("other@%d", i))
	}
	agentSession(f.c, "a", "bot@1")
	visits := func(worker string) uint64 {
		f.b.mu.Lock()
		before := f.b.visits
		f.b.mu.Unlock()
		f.takeAs(worker, 1)
		f.b.mu.Lock()
		defer f.b.mu.Unlock()
		return f.b.visits - before
	}
	if n := visits("models"); n > 2 { // one look that takes a's RunModel, one that finds nothing more
		t.Fatalf("a poll of bot@1's model visited %d queues with %d other agents ready", n, others)
	}
	if n := visits("some"); n > 2 {
		t.Fatalf("a poll of lookup for bot@1 visited %d queues", n)
	}
	g, _ := f.b.Gauges()
	agents := map[string]int{}
	for _, q := range g.Queues {
		if q.Model {
			agents[q.Agent] += q.Ready
		}
	}
	if agents["other@7"] != 1 || agents["bot@1"] != 1 { // takeAs put a's RunModel back: nothing started it
		t.Fatalf("model queue depths by agent: other@7 %d, bot@1 %d", agents["other@7"], agents["bot@1"])
	}
	if got := len(f.b.ReadyQueues()); got != others+1 {
		t.Fatalf("%d ready queues listed; want %d (one per waiting agent)", got, others+1)
	}
}
