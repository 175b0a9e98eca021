package dispatch

import (
	"cmp"
	"container/heap"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// queueKey names a ready queue: an agent's model Steps, or one tool's
// Steps of one agent ("" is the default agent).
type queueKey struct {
	model bool
	tool  string
	agent string
}

// keyOf is the ready queue of a Step (ok false for a wait, which is never
// dispatched). It follows Takes.
func keyOf(st *fsmpb.Step) (queueKey, bool) {
	switch fsm.Kind(st.Kind).Runner {
	case fsm.RunsOnModel:
		return queueKey{model: true, agent: st.Agent}, true
	case fsm.RunsOnTool:
		return queueKey{tool: st.Tool, agent: st.Agent}, true
	}
	return queueKey{}, false
}

// interest is what a Worker takes from: one ready queue, or (every) one
// tool's queues of every agent, which the broker finds through its index of
// the agents with ready Steps of the tool.
type interest struct {
	key   queueKey
	every bool
}

func (i interest) covers(k queueKey) bool {
	if i.every {
		return !k.model && k.tool == i.key.tool
	}
	return k == i.key
}

// workerKeys are the ready queues a Worker takes from: its agents' model
// queues, and each tool's queue of each agent it serves the tool for.
func workerKeys(w *fsmpb.WorkerInfo) []interest {
	var keys []interest
	for _, ag := range fsm.ModelAgents(w) {
		keys = append(keys, interest{key: queueKey{model: true, agent: ag}})
	}
	seen := map[string]bool{}
	for _, t := range w.Tools {
		if seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		if len(t.Agents) == 0 {
			keys = append(keys, interest{key: queueKey{tool: t.Name}, every: true})
			continue
		}
		for _, ag := range t.Agents {
			keys = append(keys, interest{key: queueKey{tool: t.Name, agent: ag}})
		}
	}
	return keys
}

// readyQueue holds the ready Steps of one key (docs/flow-control.md):
// by provider (a sub-queue each, skipped while its provider is held or at a
// limit), then by group (priority, fairness key; highest priority first,
// then the key with the least dispatch for its weight), then one lane per
// session, least recently served first, then by queue order.
type readyQueue struct {
	key     queueKey
	subs    map[string]*providerQueue
	waiters map[*waiter]struct{}
	depth   int // ready Steps (metrics)
}

// providerQueue is a queue's ready Steps of one provider ("" for tool Steps
// and sessions without one), as a heap of groups.
type providerQueue struct {
	q        *readyQueue
	provider string
	groups   groupHeap
	byGroup  map[groupKey]*group
	depth    int
}

// groupKey is a lane's place in the dispatch order above its session.
type groupKey struct {
	priority uint32
	fairness string
}

// group is the lanes of one (priority, fairness key) in one provider queue.
type group struct {
	sub       *providerQueue
	key       groupKey
	lanes     laneHeap
	bySession map[string]*lane
	idx       int // in sub.groups
}

// lane is one session's ready Steps in one queue, in queue order.
type lane struct {
	g       *group
	session string
	weight  uint32
	steps   stepHeap
	idx     int // in g.lanes
}

func (l *lane) head() *fsmpb.Step  { return l.steps[0].st }
func (l *lane) queue() *readyQueue { return l.g.sub.q }

// queuedStep is a ready Step and its place in its lane.
type queuedStep struct {
	st   *fsmpb.Step
	lane *lane
	idx  int // in lane.steps
}

// stepHeap orders a lane's Steps by queue sequence.
type stepHeap []*queuedStep

func (h stepHeap) Len() int { return len(h) }
func (h stepHeap) Less(i, j int) bool {
	if c := cmp.Compare(h[i].st.QueueSeq, h[j].st.QueueSeq); c != 0 {
		return c < 0
	}
	return h[i].st.Id < h[j].st.Id
}
func (h stepHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *stepHeap) Push(x any)   { q := x.(*queuedStep); q.idx = len(*h); *h = append(*h, q) }
func (h *stepHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return q
}

// lanesLess is the dispatch order of lanes, within one queue and across the
// queues a Worker takes from: higher priority, then the fairness key with
// the least dispatch for its weight, then the least recently served
// session, then the oldest head Step.
func (o *dispatchOrder) lanesLess(a, b *lane) bool {
	if a.g.key.priority != b.g.key.priority {
		return a.g.key.priority > b.g.key.priority
	}
	if a.g.key.fairness != b.g.key.fairness {
		if c := cmp.Compare(o.passOf(a.g.key.fairness), o.passOf(b.g.key.fairness)); c != 0 {
			return c < 0
		}
	}
	if c := cmp.Compare(o.served[a.session], o.served[b.session]); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.head().QueueSeq, b.head().QueueSeq); c != 0 {
		return c < 0
	}
	if a.session != b.session {
		return a.session < b.session
	}
	if a.g.key.fairness != b.g.key.fairness {
		return a.g.key.fairness < b.g.key.fairness
	}
	if ka, kb := a.queue().key, b.queue().key; ka.tool != kb.tool {
		return ka.tool < kb.tool
	} else if ka.agent != kb.agent {
		return ka.agent < kb.agent
	}
	return a.g.sub.provider < b.g.sub.provider
}

// orderedHeap is a heap of lanes or groups, each knowing its place in it
// (so a changed one is fixed in place).
type orderedHeap[T interface{ place() *int }] struct {
	items []T
	less  func(a, b T) bool
}

func (h *orderedHeap[T]) Len() int           { return len(h.items) }
func (h *orderedHeap[T]) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *orderedHeap[T]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.items[i].place() = i
	*h.items[j].place() = j
}
func (h *orderedHeap[T]) Push(x any) {
	e := x.(T)
	*e.place() = len(h.items)
	h.items = append(h.items, e)
}
func (h *orderedHeap[T]) Pop() any {
	old := h.items
	e := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	h.items = old[:len(old)-1]
	return e
}

func (l *lane) place() *int  { return &l.idx }
func (g *group) place() *int { return &g.idx }

// laneHeap orders a group's lanes; groupHeap a provider queue's groups, by
// their best lanes.
type (
	laneHeap  = orderedHeap[*lane]
	groupHeap = orderedHeap[*group]
)

func newLaneHeap(o *dispatchOrder) laneHeap { return laneHeap{less: o.lanesLess} }

func newGroupHeap(o *dispatchOrder) groupHeap {
	return groupHeap{less: func(a, b *group) bool { return o.lanesLess(a.lanes.items[0], b.lanes.items[0]) }}
}

// best is the sub-queue's next lane (nil: empty).
func (p *providerQueue) best() *lane {
	if len(p.groups.items) == 0 {
		return nil
	}
	return p.groups.items[0].lanes.items[0]
}

var (
	_ heap.Interface = (*stepHeap)(nil)
	_ heap.Interface = (*laneHeap)(nil)
	_ heap.Interface = (*groupHeap)(nil)
)

// waitersOrNil: the polls waiting on q (none when q does not exist yet).
func (q *readyQueue) waitersOrNil() map[*waiter]struct{} {
	if q == nil {
		return nil
	}
	return q.waiters
}
