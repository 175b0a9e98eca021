package fsm

import (
	"fmt"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Dispatch order and provider holds (docs/flow-control.md). A session has a
// priority, a fairness key with its weight, and a provider, all fixed when
// it is created; the leader's broker orders and limits dispatch by them. A
// model call's rate_limit failure with the provider's Retry-After holds the
// provider: the hold is a row of the state, so every Worker and every later
// leader keep it.

const (
	// DefaultPriority is the priority of a session created with none.
	DefaultPriority = 3
	MaxPriority     = 5
	// MaxFairnessWeight and MaxFairnessKey bound a session's fairness key.
	MaxFairnessWeight = 1000
	MaxFairnessKey    = 256
	// MaxRetryAfter bounds a hold: a longer Retry-After holds this long.
	MaxRetryAfter = time.Hour
)

// Priority is a session's priority, 1 (lowest) to 5.
func Priority(s *fsmpb.Session) uint32 {
	if p := s.GetPriority(); p > 0 {
		return p
	}
	return DefaultPriority
}

// FairnessWeight is a session's fairness weight (1 when it has none).
func FairnessWeight(s *fsmpb.Session) uint32 {
	if w := s.GetFairnessWeight(); w > 0 {
		return w
	}
	return 1
}

// CheckDispatchOrder checks a new session's priority, fairness key and
// weight (0 and "" stand for the parent's or the default).
func CheckDispatchOrder(priority uint32, key string, weight uint32) *Rejection {
	if priority > MaxPriority {
		return reject(CodeInvalid, "priority %d is not between 1 and %d", priority, MaxPriority)
	}
	if weight > MaxFairnessWeight {
		return reject(CodeInvalid, "fairness weight %d is not between 1 and %d", weight, MaxFairnessWeight)
	}
	if len(key) > MaxFairnessKey {
		return reject(CodeInvalid, "fairness key is longer than %d bytes", MaxFairnessKey)
	}
	return nil
}

// dispatchOrder fills a new session's priority and fairness key from the
// command, a child's from its parent where the command gives none.
func dispatchOrder(s *fsmpb.Session, c *fsmpb.CreateSession, parent *fsmpb.Session) *Rejection {
	if r := CheckDispatchOrder(c.Priority, c.FairnessKey, c.FairnessWeight); r != nil {
		return r
	}
	if len(c.Provider) > MaxFairnessKey {
		return reject(CodeInvalid, "provider is longer than %d bytes", MaxFairnessKey)
	}
	s.Priority, s.FairnessKey, s.FairnessWeight, s.Provider = c.Priority, c.FairnessKey, c.FairnessWeight, c.Provider
	if parent != nil {
		if s.Priority == 0 {
			s.Priority = parent.Priority
		}
		if s.FairnessKey == "" {
			s.FairnessKey = parent.FairnessKey
		}
		if s.FairnessWeight == 0 {
			s.FairnessWeight = parent.FairnessWeight
		}
	}
	s.Priority, s.FairnessWeight = Priority(s), FairnessWeight(s) // shown as they act
	return nil
}

// honorRetryAfter applies a model attempt's rate_limit failure with a
// Retry-After: the Step's next attempt waits for it, and so does every model
// Step of the session's provider.
func (a *applier) honorRetryAfter(s *fsmpb.Session, st *fsmpb.Step, f *fsmpb.AttemptFailure) {
	ms := f.GetRetryAfterMs()
	if ms <= 0 || f.GetErrorType() != fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT || Kind(st.Kind).Runner != RunsOnModel {
		return
	}
	until := a.now + min(ms, MaxRetryAfter.Milliseconds())
	if st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED && st.ReadyAtMs < until {
		st.ReadyAtMs = until
		a.putStep(st)
	}
	if s.Provider == "" {
		return
	}
	a.dropPassedHolds()
	if h := a.tx.ProviderHold(s.Provider); h != nil && h.UntilMs >= until {
		return
	}
	a.insert(store.TableProviderHolds, &fsmpb.ProviderHold{Provider: s.Provider, UntilMs: until, StepId: st.Id, SetAtMs: a.now})
	a.touched.provider(s.Provider)
	a.emit(s.Id, "provider_held", st.Id, fmt.Sprintf("%s until %s (Retry-After %d ms)", s.Provider, time.UnixMilli(until).UTC().Format(time.RFC3339Nano), until-a.now))
}

// dropPassedHolds deletes the holds that have passed: the table holds at
// most one row per provider, so this is bounded.
func (a *applier) dropPassedHolds() {
	var passed []*fsmpb.ProviderHold
	for h := range a.tx.ProviderHolds() {
		if h.UntilMs <= a.now {
			passed = append(passed, h)
		}
	}
	for _, h := range passed {
		a.delete(store.TableProviderHolds, h)
		a.touched.provider(h.Provider)
	}
}

// ProviderHold returns a provider's hold, or nil (one that has passed may
// still be returned until the next hold drops it).
func (s *State) ProviderHold(provider string) *fsmpb.ProviderHold {
	return s.tx.ProviderHold(provider)
}

// ProviderHolds returns every provider's hold, by provider.
func (s *State) ProviderHolds() []*fsmpb.ProviderHold {
	return store.All[*fsmpb.ProviderHold](s.tx, store.TableProviderHolds, store.IndexID)
}
