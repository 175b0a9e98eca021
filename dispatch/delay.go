package dispatch

import (
	"cmp"
	"container/heap"
	"slices"
	"strings"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Kinds of due items in the broker's delay heap.
const (
	dueReady  = "ready"  // a queued Step whose backoff or poll interval ends
	dueTimer  = "timer"  // an AwaitTimer Step: the leader owes a FireTimer
	dueResume = "resume" // an errored session: the leader owes a ResumeErrored
	// a schedule whose next slot came: the leader owes a FireScheduleSlot
	dueSchedule = "schedule"
	// a schedule whose queued slot's wait ended (the previous slot's
	// session is no longer under way): the leader owes its start
	dueQueued = "schedule-queued"
)

// clockRecheck bounds how long the delay heap sleeps: due times are wall
// clock milliseconds, and a sleep measured on the monotonic clock would
// miss a step of the wall clock.
const clockRecheck = time.Second

type dueKey struct {
	kind string
	id   string
}

// delayItem is one entry of the delay heap.
type delayItem struct {
	due
	step *fsmpb.Step // for dueReady: the Step to queue when it comes due
	idx  int
}

// delayHeap orders items by due time, then kind and id.
type delayHeap []*delayItem

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return dueLess(h[i].due, h[j].due) }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *delayHeap) Push(x any)        { it := x.(*delayItem); it.idx = len(*h); *h = append(*h, it) }
func (h *delayHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

func dueLess(a, b due) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.id < b.id
}

// schedule puts an item in the delay heap, or, when it is due already, in
// the ready queues (a Step) or the owed set (a timer or resume).
func (b *Broker) schedule(d due, st *fsmpb.Step, now int64) {
	if d.at <= now {
		b.dueNow(d, st)
		return
	}
	it := &delayItem{due: d, step: st}
	heap.Push(&b.delay, it)
	b.setDelayed(dueKey{d.kind, d.id}, it)
	if it.idx == 0 {
		signal(b.kick) // a new earliest item: the driver sleeps too long
	}
}

func (b *Broker) dueNow(d due, st *fsmpb.Step) {
	if d.kind == dueReady {
		b.pushReady(st, true)
		return
	}
	b.setOwed(dueKey{d.kind, d.id}, d)
	signal(b.owedCh)
}

// unschedule takes an item out of the delay heap and the owed set.
func (b *Broker) unschedule(kind, id string) {
	k := dueKey{kind, id}
	if it := b.delayed[k]; it != nil {
		heap.Remove(&b.delay, it.idx)
		b.deleteDelayed(k)
	}
	b.deleteOwed(k)
}

// promoteDue moves every item that came due out of the heap and returns the
// time of the next one (0: none).
func (b *Broker) promoteDue(now int64) int64 {
	for len(b.delay) > 0 && b.delay[0].at <= now {
		it := heap.Pop(&b.delay).(*delayItem)
		b.deleteDelayed(dueKey{it.kind, it.id})
		b.dueNow(it.due, it.step)
	}
	if len(b.delay) == 0 {
		return 0
	}
	return b.delay[0].at
}

// drive is the delay heap's goroutine: it sleeps until the earliest item
// comes due, or until a new earliest item is scheduled.
func (b *Broker) drive() {
	defer close(b.driven)
	t := time.NewTimer(clockRecheck)
	defer t.Stop()
	for {
		b.mu.Lock()
		now := b.now().UnixMilli()
		next := b.promoteDue(now)
		b.mu.Unlock()
		sleep := clockRecheck
		if next > 0 {
			sleep = min(sleep, max(time.Duration(next-now)*time.Millisecond, time.Millisecond))
		}
		t.Reset(sleep)
		select {
		case <-b.stop:
			return
		case <-b.kick:
		case <-t.C:
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}

// Owed returns the timers and resumes that came due and are not yet
// resolved, earliest first.
func (b *Broker) Owed() []due {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]due, 0, len(b.owed))
	for _, d := range b.owed {
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y due) int {
		return cmp.Or(cmp.Compare(x.at, y.at), strings.Compare(x.kind, y.kind), strings.Compare(x.id, y.id))
	})
	return out
}

// signal wakes the reader of a channel of capacity one without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
