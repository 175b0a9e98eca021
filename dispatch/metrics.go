package dispatch

import (
	"sort"
	"time"
)

// The broker keeps its counts for metrics as it goes, so a scrape reads
// them without walking the queues or the delay heap.

func (b *Broker) setDelayed(k dueKey, it *delayItem) {
	if _, ok := b.delayed[k]; !ok && k.kind == dueTimer {
		b.timersPending++
	}
	b.delayed[k] = it
}

func (b *Broker) deleteDelayed(k dueKey) {
	if _, ok := b.delayed[k]; ok && k.kind == dueTimer {
		b.timersPending--
	}
	delete(b.delayed, k)
}

func (b *Broker) setOwed(k dueKey, d due) {
	if _, ok := b.owed[k]; !ok && k.kind == dueTimer {
		b.timersPending++
	}
	b.owed[k] = d
}

func (b *Broker) deleteOwed(k dueKey) {
	if _, ok := b.owed[k]; ok && k.kind == dueTimer {
		b.timersPending--
	}
	delete(b.owed, k)
}

// QueueDepth is the number of ready Steps in one queue: an agent's model
// Steps (Model set) or one tool's Steps of an agent ("" is the default
// agent).
type QueueDepth struct {
	Model bool
	Tool  string
	Agent string
	Ready int
}

// Gauges are the broker's counts: ready Steps by queue (in-flight Steps,
// being started, are in none), and AwaitTimer Steps not fired yet.
type Gauges struct {
	Queues        []QueueDepth
	TimersPending int
	// Providers: each provider with a limit or a hold, by name.
	Providers []ProviderGauge
}

// ProviderGauge is one provider's counts: model Steps running against it,
// ready ones it holds back (held or at a limit), and how long its hold
// still lasts.
type ProviderGauge struct {
	Name      string
	Running   int
	Throttled int
	HeldFor   time.Duration
}

// Gauges reads the counts; ok is false when the broker is stopped or
// deposed. The cost is one entry per queue (one per tool ever queued).
func (b *Broker) Gauges() (g Gauges, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.deposed {
		return Gauges{}, false
	}
	for k, q := range b.queues {
		g.Queues = append(g.Queues, QueueDepth{Model: k.model, Tool: k.tool, Agent: k.agent, Ready: q.depth})
	}
	sort.Slice(g.Queues, func(i, j int) bool {
		if g.Queues[i].Tool != g.Queues[j].Tool {
			return g.Queues[i].Tool < g.Queues[j].Tool
		}
		return g.Queues[i].Agent < g.Queues[j].Agent
	})
	g.TimersPending = b.timersPending
	now := b.now().UnixMilli()
	for name, p := range b.providers {
		pg := ProviderGauge{Name: name, Running: len(p.running), Throttled: b.throttledLocked(p, now)}
		if p.holdUntil > now {
			pg.HeldFor = time.Duration(p.holdUntil-now) * time.Millisecond
		}
		g.Providers = append(g.Providers, pg)
	}
	sort.Slice(g.Providers, func(i, j int) bool { return g.Providers[i].Name < g.Providers[j].Name })
	return g, true
}
