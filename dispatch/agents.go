package dispatch

import (
	"sort"

	"github.com/dexhq/dex/lease"
)

// ReadyQueues lists the ready queues that hold Steps now (one entry per
// queue, not per Step), for the leader's tool wait: a queue no live Worker
// serves fails its Steps after the wait. Nil when the broker does not lead.
func (b *Broker) ReadyQueues() []lease.ReadyQueue {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.deposed {
		return nil
	}
	var out []lease.ReadyQueue
	for k, q := range b.queues {
		if q.depth > 0 {
			out = append(out, lease.ReadyQueue{Model: k.model, Tool: k.tool, Agent: k.agent})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.Tool != c.Tool {
			return a.Tool < c.Tool
		}
		return a.Agent < c.Agent
	})
	return out
}
