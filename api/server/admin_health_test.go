package server

import (
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

type fakeHealth []*dexv1.WorkerHealth

func (f fakeHealth) WorkerHealth() []*dexv1.WorkerHealth { return f }

func TestAdminReportsTheDispatchersWorkerHealth(t *testing.T) {
	a := &Admin{}
	if got := a.workerHealth(); got != nil {
		t.Fatalf("without a source: %v; want none", got)
	}
	a.useWorkerHealth(struct{}{}) // a dispatcher that keeps no health
	if a.health != nil {
		t.Fatal("a dispatcher without WorkerHealth was taken as a source")
	}
	a.useWorkerHealth(fakeHealth{{WorkerId: "w1", Unhealthy: true, UnclaimedInARow: 2, UnclaimedExpiries: 2}})
	if got := a.workerHealth(); len(got) != 1 || got[0].WorkerId != "w1" || !got[0].Unhealthy {
		t.Fatalf("health %v; want w1 unhealthy", got)
	}
}

func TestStatusTakesWorkerHealthFromTheLeaderOnly(t *testing.T) {
	w := []*dexv1.WorkerHealth{{WorkerId: "w1", Unhealthy: true}}
	states := []*dexv1.NodeStateResponse{
		{Id: "n1", State: "follower", Workers: []*dexv1.WorkerHealth{{WorkerId: "stale"}}},
		nil, // unreachable
		{Id: "n3", State: "leader", Workers: w},
	}
	if got := leaderState("n3", states).GetWorkers(); len(got) != 1 || got[0].WorkerId != "w1" {
		t.Fatalf("got %v; want the leader's", got)
	}
	if got := leaderState("", states).GetWorkers(); got != nil {
		t.Fatalf("with no leader: %v; want none", got)
	}
	if got := leaderState("n1", states).GetWorkers(); got != nil {
		t.Fatalf("from a node that is not leading: %v; want none", got)
	}
}
