package server

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// WorkerHealthSource is the leader's bookkeeping of Workers that take tasks
// and never claim them (the dispatcher implements it; nil off the leader).
type WorkerHealthSource interface {
	WorkerHealth() []*dexv1.WorkerHealth
}

// useWorkerHealth lets the admin service report the dispatcher's Worker
// health, when the dispatcher keeps one.
func (a *Admin) useWorkerHealth(d any) {
	if h, ok := d.(WorkerHealthSource); ok {
		a.health = h
	}
}

// workerHealth is this node's Worker health: only a leader has any.
func (a *Admin) workerHealth() []*dexv1.WorkerHealth {
	if a.health == nil {
		return nil
	}
	return a.health.WorkerHealth()
}

// leaderWorkers is the Worker health in the leader's NodeState, among the
// states Status gathered (self's included).
func leaderWorkers(leader string, states []*dexv1.NodeStateResponse) []*dexv1.WorkerHealth {
	for _, r := range states {
		if r != nil && r.Id == leader && r.State == "leader" {
			return r.Workers
		}
	}
	return nil
}
