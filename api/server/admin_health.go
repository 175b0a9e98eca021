package server

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// WorkerHealthSource is the leader's bookkeeping of Workers that take tasks
// and never claim them (the dispatcher implements it; nil off the leader).
type WorkerHealthSource interface {
	WorkerHealth() []*dexv1.WorkerHealth
}

// ProviderSource is the leader's count of the providers' limits and holds
// (the dispatcher implements it).
type ProviderSource interface {
	Providers() []*dexv1.ProviderStatus
}

// useWorkerHealth lets the admin service report the dispatcher's Worker
// health, when the dispatcher keeps one.
func (a *Admin) useWorkerHealth(d any) {
	if h, ok := d.(WorkerHealthSource); ok {
		a.health = h
	}
	if p, ok := d.(ProviderSource); ok {
		a.providers = p
	}
}

// providerStatus is this node's report of the providers: only a leader has
// one.
func (a *Admin) providerStatus() []*dexv1.ProviderStatus {
	if a.providers == nil {
		return nil
	}
	return a.providers.Providers()
}

// workerHealth is this node's Worker health: only a leader has any.
func (a *Admin) workerHealth() []*dexv1.WorkerHealth {
	if a.health == nil {
		return nil
	}
	return a.health.WorkerHealth()
}

// leaderState is the leader's NodeState among the states Status gathered
// (self's included; nil when the leader did not answer as leader).
func leaderState(leader string, states []*dexv1.NodeStateResponse) *dexv1.NodeStateResponse {
	for _, r := range states {
		if r != nil && r.Id == leader && r.State == "leader" {
			return r
		}
	}
	return nil
}
