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

// readyQueue holds the ready Steps of one key as one lane per session; the
// lanes are a heap, least recently served session first.
type readyQueue struct {
	key       queueKey
	lanes     laneHeap
	bySession map[string]*lane
	waiters   map[*waiter]struct{}
	depth     int // ready Steps (metrics)
}

// lane is one session's ready Steps in one queue, in queue order.
type lane struct {
	q       *readyQueue
	session string
	steps   stepHeap
	idx     int // in q.lanes
}

func (l *lane) head() *fsmpb.Step { return l.steps[0].st }

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

// laneHeap orders lanes: least recently served session first, then the
// oldest head Step, as the dispatcher always has.
type laneHeap struct {
	items  []*lane
	served map[string]uint64
}

// lanesLess is the order of lanes, within one queue and across the queues a
// Worker takes from.
func lanesLess(served map[string]uint64, a, b *lane) bool {
	if c := cmp.Compare(served[a.session], served[b.session]); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.head().QueueSeq, b.head().QueueSeq); c != 0 {
		return c < 0
	}
	if a.session != b.session {
		return a.session < b.session
	}
	if a.q.key.tool != b.q.key.tool {
		return a.q.key.tool < b.q.key.tool
	}
	return a.q.key.agent < b.q.key.agent
}

func (h *laneHeap) Len() int           { return len(h.items) }
func (h *laneHeap) Less(i, j int) bool { return lanesLess(h.served, h.items[i], h.items[j]) }
func (h *laneHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx = i
	h.items[j].idx = j
}
func (h *laneHeap) Push(x any) { l := x.(*lane); l.idx = len(h.items); h.items = append(h.items, l) }
func (h *laneHeap) Pop() any {
	old := h.items
	l := old[len(old)-1]
	old[len(old)-1] = nil
	h.items = old[:len(old)-1]
	return l
}

var (
	_ heap.Interface = (*stepHeap)(nil)
	_ heap.Interface = (*laneHeap)(nil)
)

// waitersOrNil: the polls waiting on q (none when q does not exist yet).
func (q *readyQueue) waitersOrNil() map[*waiter]struct{} {
	if q == nil {
		return nil
	}
	return q.waiters
}
