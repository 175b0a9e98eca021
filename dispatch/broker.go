package dispatch

import (
	"container/heap"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Broker is the leader's view of what can be dispatched and what comes due,
// built when leadership is established and fed from what each applied entry
// wrote (fsm.Applied), never by rescanning tables:
//   - ready queues per model or tool and agent, fair across sessions, with
//     an index of the agents with ready Steps of each tool (for Workers that
//     serve a tool for every agent);
//   - a delay heap for queued Steps not ready yet, AwaitTimer due times and
//     errored sessions' resume times;
//   - the owed set: timers and resumes that came due, for the timer wheel.
//
// A poll that finds nothing waits on the queues its Worker takes from and
// is woken only when a Step becomes ready in one of them.
type Broker struct {
	src   StateSource
	epoch uint64
	now   func() time.Time
	log   *zap.Logger

	mu      sync.Mutex
	deposed bool // a newer epoch was opened
	stopped bool
	started bool
	queues  map[queueKey]*readyQueue
	// agentsOf: tool -> the agents whose queue of it has ready Steps now;
	// wild: tool -> polls waiting for the tool's Steps of every agent.
	agentsOf map[string]map[string]struct{}
	wild     map[string]map[*waiter]struct{}
	visits   uint64                 // queues looked at by polls (a poll visits only the queues it serves)
	ready    map[string]*queuedStep // by Step id
	lanesOf  map[string][]*lane     // a session's lanes, in every queue
	inflight map[string]bool        // picked, StartAttempt being proposed
	// served: a tick per session, taken when it was last handed a Step; the
	// least recently served session goes first.
	served  map[string]uint64
	tick    uint64
	delay   delayHeap
	delayed map[dueKey]*delayItem
	owed    map[dueKey]due
	// health counts the Workers' unclaimed expiries; since and preferOther
	// keep a Step from a Worker that should avoid it (prefer.go).
	health      *healthBook
	since       map[string]readySince
	preferOther time.Duration
	// timersPending: AwaitTimer Steps delayed or owed (metrics).
	timersPending int
	// nwaiting: polls registered as waiting (pair.go reads it before a
	// prediction is worth its cost).
	nwaiting int

	kick   chan struct{} // to drive: a new earliest delay
	owedCh chan struct{} // to the timer wheel: something came due
	stop   chan struct{}
	driven chan struct{}
}

// newBroker returns an empty broker; start loads it.
func newBroker(src StateSource, epoch uint64, now func() time.Time, log *zap.Logger) *Broker {
	b := &Broker{
		src: src, epoch: epoch, now: now, log: log,
		queues: map[queueKey]*readyQueue{}, agentsOf: map[string]map[string]struct{}{}, wild: map[string]map[*waiter]struct{}{}, ready: map[string]*queuedStep{}, lanesOf: map[string][]*lane{},
		inflight: map[string]bool{}, served: map[string]uint64{},
		delayed: map[dueKey]*delayItem{}, owed: map[dueKey]due{},
		health: newHealthBook(), since: map[string]readySince{}, preferOther: DefaultPreferOtherWait,
		kick: make(chan struct{}, 1), owedCh: make(chan struct{}, 1),
		stop: make(chan struct{}), driven: make(chan struct{}),
	}
	b.health.onChange = func(worker string, unhealthy bool, inARow uint32) {
		if unhealthy {
			log.Warn("worker marked unhealthy: its tasks expire unclaimed; it gets Steps only when no healthy Worker polls for them",
				zap.String("worker", worker), zap.Uint32("unclaimed_in_a_row", inARow))
			return
		}
		log.Info("worker healthy again: it claimed a task", zap.String("worker", worker))
	}
	return b
}

// start loads the broker from the state's indexes (queued Steps, waiting
// timers by due time, errored sessions by resume time) and starts its delay
// heap. Install the broker where Applied reaches it first: an entry applied
// during the load is then re-read after it, never missed.
func (b *Broker) start() {
	b.mu.Lock()
	b.loadLocked(b.src.State())
	b.started = true
	b.mu.Unlock()
	go b.drive()
}

func (b *Broker) loadLocked(st *fsm.State) {
	now := b.now().UnixMilli()
	n := 0
	for _, s := range st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_QUEUED) {
		b.health.observe(s.Id, s)
		b.updateStepLocked(s.Id, s, now)
		n++
	}
	for _, s := range st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_RUNNING) {
		b.health.observe(s.Id, s)
	}
	for _, s := range st.WaitingTimers() {
		b.updateStepLocked(s.Id, s, now)
		n++
	}
	for _, s := range st.ErroredToResume() {
		b.updateSessionLocked(s.Id, s, now)
		n++
	}
	b.log.Info("broker loaded", zap.Uint64("epoch", b.epoch), zap.Int("rows", n), zap.Int("ready", len(b.ready)), zap.Int("delayed", len(b.delay)), zap.Int("owed", len(b.owed)))
}

// Stop ends the broker: its delay heap stops and every waiting poll wakes.
func (b *Broker) Stop() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	b.wakeAllLocked()
	b.mu.Unlock()
	close(b.stop)
	if b.started {
		<-b.driven
	}
}

// Applied updates the broker from one applied entry: it re-reads the rows
// the entry wrote, from the newest state.
func (b *Broker) Applied(a *fsm.Applied) {
	if a == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.deposed {
		return
	}
	st := b.src.State()
	if e := st.Meta().Epoch; e != b.epoch {
		// A newer leader opened an epoch: wake every poll, which then fails
		// with ErrNotLeader, and the timer wheel, which idles.
		b.deposed = true
		b.wakeAllLocked()
		signal(b.owedCh)
		b.log.Warn("broker deposed: a newer epoch was opened", zap.Uint64("epoch", b.epoch), zap.Uint64("current_epoch", e))
		return
	}
	now := b.now().UnixMilli()
	if a.Restored {
		b.reloadLocked(st)
		return
	}
	for _, id := range a.Steps {
		s := st.Step(id)
		b.health.observe(id, s)
		b.updateStepLocked(id, s, now)
	}
	for _, id := range a.Sessions {
		b.updateSessionLocked(id, st.Session(id), now)
	}
}

// reloadLocked rebuilds the queues and heap after the state was replaced.
// Steps in flight stay in flight; the served ticks are kept.
func (b *Broker) reloadLocked(st *fsm.State) {
	for id := range b.ready {
		b.removeReadyLocked(id)
	}
	b.delay = nil
	b.delayed = map[dueKey]*delayItem{}
	b.owed = map[dueKey]due{}
	b.timersPending = 0
	b.loadLocked(st)
	signal(b.kick)
	b.wakeAllLocked()
}

// updateStepLocked places a Step as the state has it now (nil: gone). A Step
// in flight is left to release, which re-reads it.
func (b *Broker) updateStepLocked(id string, s *fsmpb.Step, now int64) {
	if b.inflight[id] {
		return
	}
	if s == nil || s.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		delete(b.since, id)
	}
	b.removeReadyLocked(id)
	b.unschedule(dueReady, id)
	b.unschedule(dueTimer, id)
	if s == nil {
		return
	}
	if s.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
		if _, ok := keyOf(s); ok {
			b.schedule(due{dueReady, id, s.ReadyAtMs}, s, now)
		}
		return
	}
	if at, ok := fsm.TimerDue(s); ok {
		b.schedule(due{dueTimer, id, at}, nil, now)
	}
}

func (b *Broker) updateSessionLocked(id string, s *fsmpb.Session, now int64) {
	b.unschedule(dueResume, id)
	if at, ok := fsm.ResumeDue(s); ok {
		b.schedule(due{dueResume, id, at}, nil, now)
	}
}

func (b *Broker) queue(k queueKey) *readyQueue {
	q := b.queues[k]
	if q == nil {
		q = &readyQueue{key: k, lanes: laneHeap{served: b.served}, bySession: map[string]*lane{}, waiters: map[*waiter]struct{}{}}
		b.queues[k] = q
	}
	return q
}

// pushReady queues a ready Step in its session's lane and, if wake, wakes
// the polls waiting on its queue.
func (b *Broker) pushReady(s *fsmpb.Step, wake bool) {
	b.markReady(s, b.now().UnixMilli())
	k, _ := keyOf(s)
	q := b.queue(k)
	l := q.bySession[s.SessionId]
	if l == nil {
		l = &lane{q: q, session: s.SessionId}
		q.bySession[s.SessionId] = l
		b.lanesOf[s.SessionId] = append(b.lanesOf[s.SessionId], l)
		qs := &queuedStep{st: s, lane: l}
		heap.Push(&l.steps, qs)
		heap.Push(&q.lanes, l)
		b.ready[s.Id] = qs
	} else {
		qs := &queuedStep{st: s, lane: l}
		heap.Push(&l.steps, qs)
		heap.Fix(&q.lanes, l.idx) // its head may be older now
		b.ready[s.Id] = qs
	}
	if q.depth++; q.depth == 1 && !k.model {
		if b.agentsOf[k.tool] == nil {
			b.agentsOf[k.tool] = map[string]struct{}{}
		}
		b.agentsOf[k.tool][k.agent] = struct{}{}
	}
	if wake {
		for w := range q.waiters {
			b.wakeLocked(w)
		}
		if !k.model {
			for w := range b.wild[k.tool] {
				b.wakeLocked(w)
			}
		}
	}
}

// removeReadyLocked takes a Step out of its ready queue, if it is in one.
func (b *Broker) removeReadyLocked(id string) {
	qs := b.ready[id]
	if qs == nil {
		return
	}
	delete(b.ready, id)
	l := qs.lane
	if l.q.depth--; l.q.depth == 0 && !l.q.key.model {
		if ags := b.agentsOf[l.q.key.tool]; ags != nil {
			delete(ags, l.q.key.agent)
			if len(ags) == 0 {
				delete(b.agentsOf, l.q.key.tool)
			}
		}
	}
	heap.Remove(&l.steps, qs.idx)
	if len(l.steps) > 0 {
		heap.Fix(&l.q.lanes, l.idx)
		return
	}
	heap.Remove(&l.q.lanes, l.idx)
	delete(l.q.bySession, l.session)
	lanes := b.lanesOf[l.session]
	for i, x := range lanes {
		if x == l {
			lanes = append(lanes[:i], lanes[i+1:]...)
			break
		}
	}
	if len(lanes) == 0 {
		delete(b.lanesOf, l.session)
	} else {
		b.lanesOf[l.session] = lanes
	}
}

// serve marks a session as served now: its lanes go behind every other.
func (b *Broker) serve(session string) {
	b.tick++
	b.served[session] = b.tick
	for _, l := range b.lanesOf[session] {
		heap.Fix(&l.q.lanes, l.idx)
	}
}

// take picks ready Steps of exactly these queues for an unnamed poller (one
// that avoids nothing).
func (b *Broker) take(keys []queueKey, max int, refused map[string]int, wait bool) ([]*fsmpb.Step, *waiter, error) {
	in := make([]interest, len(keys))
	for i, k := range keys {
		in[i] = interest{key: k}
	}
	return b.takeFor("", in, max, refused, wait)
}

// bestLane is the lane a poll of these interests serves next (nil: none is
// ready). A tool served for every agent visits only the queues of agents
// with ready Steps of it.
func (b *Broker) bestLane(keys []interest) *lane {
	var best *lane
	consider := func(k queueKey) {
		b.visits++
		q := b.queues[k]
		if q == nil || len(q.lanes.items) == 0 {
			return
		}
		if l := q.lanes.items[0]; best == nil || lanesLess(b.served, l, best) {
			best = l
		}
	}
	for _, i := range keys {
		if !i.every {
			consider(i.key)
			continue
		}
		for ag := range b.agentsOf[i.key.tool] {
			consider(queueKey{tool: i.key.tool, agent: ag})
		}
	}
	return best
}

// takeFor picks up to max ready Steps for worker from the queues of keys,
// least recently served session first and in queue order within a session,
// and puts them in flight. Steps refused twice to this poll are left alone,
// and so are Steps the Worker should leave to another one (passOn). When it
// finds nothing and wait is set, it registers a waiter on those queues in
// the same critical section, so no Step that becomes ready later is missed.
func (b *Broker) takeFor(worker string, keys []interest, max int, refused map[string]int, wait bool) ([]*fsmpb.Step, *waiter, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.deposed {
		return nil, nil, ErrNotLeader
	}
	now := b.now().UnixMilli()
	var recheck int64
	var out, skipped []*fsmpb.Step
	for len(out) < max {
		best := b.bestLane(keys)
		if best == nil {
			break
		}
		s := best.head()
		pass, again := b.passOn(worker, s, best.q, now)
		b.removeReadyLocked(s.Id)
		if refused[s.Id] >= 2 || pass {
			if again > 0 && (recheck == 0 || again < recheck) {
				recheck = again
			}
			skipped = append(skipped, s)
			continue
		}
		out = append(out, s)
		b.inflight[s.Id] = true
		b.serve(s.SessionId)
	}
	for _, s := range skipped {
		b.pushReady(s, false)
	}
	if len(b.served) > 4096 && len(b.served) > 4*len(b.lanesOf) {
		for id := range b.served {
			if b.lanesOf[id] == nil {
				delete(b.served, id) // sessions with nothing ready now
			}
		}
	}
	if len(out) > 0 || !wait {
		return out, nil, nil
	}
	w := &waiter{ch: make(chan struct{}), keys: keys, worker: worker}
	b.nwaiting++
	if recheck > 0 {
		w.recheck = time.Duration(recheck-now) * time.Millisecond
	}
	for _, i := range keys {
		if !i.every {
			b.queue(i.key).waiters[w] = struct{}{}
			continue
		}
		if b.wild[i.key.tool] == nil {
			b.wild[i.key.tool] = map[*waiter]struct{}{}
		}
		b.wild[i.key.tool][w] = struct{}{}
	}
	return nil, w, nil
}

// release takes a Step out of flight once its StartAttempt was applied (or
// will not be proposed) and places it as the newest state has it: a Step
// whose attempt started is gone, a refused one is queued again.
func (b *Broker) release(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.inflight, id)
	if b.stopped || b.deposed {
		return
	}
	b.updateStepLocked(id, b.src.State().Step(id), b.now().UnixMilli())
}

// waiter is one poll waiting for a Step in any of its queues.
type waiter struct {
	ch     chan struct{} // closed when woken
	keys   []interest
	woken  bool
	worker string // "" for an unnamed poller
	// recheck: a Step was left for another Worker; look again after this
	// long even if nothing wakes the waiter (0: no).
	recheck time.Duration
	// offer: woken with a pipelined StartAttempt (pair.go); set before ch
	// is closed.
	offer *offer
}

func (b *Broker) wakeLocked(w *waiter) {
	if w.woken {
		return
	}
	w.woken = true
	close(w.ch)
	b.unwaitLocked(w)
}

// unwaitLocked takes a waiter out of every queue it waits on.
func (b *Broker) unwaitLocked(w *waiter) {
	b.nwaiting--
	for _, i := range w.keys {
		if !i.every {
			if q := b.queues[i.key]; q != nil {
				delete(q.waiters, w)
			}
			continue
		}
		if ws := b.wild[i.key.tool]; ws != nil {
			if delete(ws, w); len(ws) == 0 {
				delete(b.wild, i.key.tool)
			}
		}
	}
}

func (b *Broker) wakeAllLocked() {
	for _, q := range b.queues {
		for w := range q.waiters {
			b.wakeLocked(w)
		}
	}
	for _, ws := range b.wild {
		for w := range ws {
			b.wakeLocked(w)
		}
	}
}

// drop unregisters a waiter that was not woken (its poll ended).
func (b *Broker) drop(w *waiter) { b.settle(w) }
