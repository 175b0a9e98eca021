package dispatch

import (
	"math"
	"sort"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Provider limits and holds (docs/flow-control.md). A model Step counts
// against its session's provider. The broker skips a provider's sub-queues
// while the provider is held (a replicated ProviderHold, from a rate_limit
// failure's Retry-After) or at one of its limits: running calls, calls per
// minute, tokens per minute. The counts live in the leader's memory; a new
// leader counts the calls running from the state and starts each
// per-minute window full.

// ProviderLimit is one provider's limits (0: none).
type ProviderLimit struct {
	MaxConcurrent   uint32
	CallsPerMinute  uint32
	TokensPerMinute uint64
}

func (l ProviderLimit) any() bool {
	return l.MaxConcurrent > 0 || l.CallsPerMinute > 0 || l.TokensPerMinute > 0
}

// providerState is the broker's count of one provider.
type providerState struct {
	name      string
	limit     ProviderLimit
	running   map[string]struct{} // its model Steps in flight or running
	holdUntil int64
	hold      *fsmpb.ProviderHold
	calls     bucket
	tokens    bucket
	// subs: its non-empty sub-queues, whose polls wake when a call ends.
	subs map[*providerQueue]struct{}
}

// bucket is a per-minute allowance, refilled continuously up to its rate
// and starting full.
type bucket struct {
	avail float64
	at    int64
}

func (k *bucket) level(rate float64, now int64) float64 {
	if k.at == 0 {
		k.avail, k.at = rate, now
	}
	if now > k.at {
		k.avail = min(rate, k.avail+float64(now-k.at)*rate/60000)
		k.at = now
	}
	return k.avail
}

// refillAt is when a bucket below want reaches it.
func refillAt(avail, want, rate float64, now int64) int64 {
	return now + int64(math.Ceil((want-avail)*60000/rate))
}

// blocked reports whether the provider takes no call now, and until when
// (0: until one of its calls ends).
func (p *providerState) blocked(now int64) (bool, int64) {
	if p == nil {
		return false, 0
	}
	if p.holdUntil > now {
		return true, p.holdUntil
	}
	l := p.limit
	if l.MaxConcurrent > 0 && len(p.running) >= int(l.MaxConcurrent) {
		return true, 0
	}
	if l.CallsPerMinute > 0 {
		r := float64(l.CallsPerMinute)
		if a := p.calls.level(r, now); a < 1 {
			return true, refillAt(a, 1, r, now)
		}
	}
	if l.TokensPerMinute > 0 {
		r := float64(l.TokensPerMinute)
		if a := p.tokens.level(r, now); a < 1 {
			return true, refillAt(a, 1, r, now)
		}
	}
	return false, 0
}

// provider is a provider's state (nil for none, or one with neither a limit
// nor a hold).
func (b *Broker) provider(name string) *providerState {
	if name == "" {
		return nil
	}
	return b.providers[name]
}

func (b *Broker) addProvider(name string, l ProviderLimit) *providerState {
	p := b.providers[name]
	if p == nil {
		p = &providerState{name: name, limit: l, running: map[string]struct{}{}, subs: map[*providerQueue]struct{}{}}
		b.providers[name] = p
	}
	return p
}

// loadHoldLocked reads a provider's hold from the state.
func (b *Broker) loadHoldLocked(st *fsm.State, name string) {
	h := st.ProviderHold(name)
	p := b.provider(name)
	if h == nil {
		if p != nil {
			p.holdUntil, p.hold = 0, nil
		}
		return
	}
	if p == nil {
		p = b.addProvider(name, ProviderLimit{})
	}
	p.holdUntil, p.hold = h.UntilMs, h
}

// took counts a model Step handed out against its provider.
func (b *Broker) took(p *providerState, stepID string, now int64) {
	if p == nil || !p.limit.any() {
		return
	}
	p.running[stepID] = struct{}{}
	b.runningOf[stepID] = p
	if r := float64(p.limit.CallsPerMinute); r > 0 {
		p.calls.level(r, now)
		p.calls.avail--
	}
}

// trackRunning follows a model Step of a limited provider as the state has
// it: running counts against the provider; when it stops, its tokens are
// charged and the provider's polls wake.
func (b *Broker) trackRunning(id string, s *fsmpb.Step, now int64) {
	if p := b.runningOf[id]; p != nil {
		if s != nil && s.Status == fsmpb.StepStatus_STEP_STATUS_RUNNING {
			return
		}
		delete(p.running, id)
		delete(b.runningOf, id)
		if u := s.GetUsage(); u != nil && p.limit.TokensPerMinute > 0 {
			p.tokens.level(float64(p.limit.TokensPerMinute), now)
			p.tokens.avail -= float64(u.InputTokens + u.OutputTokens)
		}
		for sub := range p.subs {
			for w := range sub.q.waiters {
				b.wakeLocked(w)
			}
		}
		return
	}
	if !b.limited || s == nil || s.Status != fsmpb.StepStatus_STEP_STATUS_RUNNING || fsm.Kind(s.Kind).Runner != fsm.RunsOnModel {
		return
	}
	if p := b.provider(b.orderOf(s.SessionId).provider); p != nil && p.limit.any() {
		p.running[id] = struct{}{}
		b.runningOf[id] = p
	}
}

// throttledLocked is how many ready Steps a provider's hold or limit keeps
// from the Workers now (status and metrics ask; a queue per tool and agent).
func (b *Broker) throttledLocked(p *providerState, now int64) int {
	if blocked, _ := p.blocked(now); !blocked {
		return 0
	}
	n := 0
	for _, q := range b.queues {
		if sub := q.subs[p.name]; sub != nil {
			n += sub.depth
		}
	}
	return n
}

// Providers reports each provider with a limit, a hold in force or a call
// running, by name.
func (b *Broker) Providers() []*dexv1.ProviderStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.deposed {
		return nil
	}
	now := b.now().UnixMilli()
	var out []*dexv1.ProviderStatus
	for name, p := range b.providers {
		held := p.holdUntil > now
		if !p.limit.any() && !held && len(p.running) == 0 {
			continue
		}
		ps := &dexv1.ProviderStatus{
			Provider: name, MaxConcurrent: p.limit.MaxConcurrent, CallsPerMinute: p.limit.CallsPerMinute,
			TokensPerMinute: p.limit.TokensPerMinute, Running: uint32(len(p.running)),
		}
		if held {
			h := p.hold
			ps.Hold = &dexv1.ProviderHold{Provider: h.Provider, UntilMs: h.UntilMs, StepId: h.StepId, SetAtMs: h.SetAtMs}
		}
		ps.Throttled = uint32(b.throttledLocked(p, now))
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out
}
