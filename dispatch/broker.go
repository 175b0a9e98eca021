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
	// order: sessions' served ticks and fairness keys' passes (fairness.go);
	// orders: sessions' priority, key and provider, as the state has them.
	order  *dispatchOrder
	orders map[string]laneOrder
	// providers: the providers with a limit or a hold (providers.go);
	// runningOf: the model Steps counted against one; limited: some
	// provider has a limit.
	providers map[string]*providerState
	runningOf map[string]*providerState
	limited   bool
	// agentProviders: the agents' providers, for a Step paired before its
	// session exists (pair.go).
	agentProviders map[string]string
	delay          delayHeap
	delayed        map[dueKey]*delayItem
	owed           map[dueKey]due
	// health counts the Workers' unclaimed expiries; since and preferOther
	// keep a Step from a Worker that should avoid it (prefer.go).
	health      *healthBook
	since       map[string]readySince
	preferOther time.Duration
	// timersPending: AwaitTimer Steps delayed or owed (metrics).
	timersPending int
	// queuedOn: the session a schedule's queued slot waits for, by
	// session id, and the other way (schedules.go).
	queuedOn   map[string]string
	queuedWait map[string]string
	// nwaiting: polls registered as waiting (pair.go reads it before a
	// prediction is worth its cost).
	nwaiting int

	kick   chan struct{} // to drive: a new earliest delay
	owedCh chan struct{} // to the timer wheel: something came due
	stop   chan struct{}
	driven chan struct{}
}

// newBroker returns an empty broker; start loads it. limits are the
// providers' limits by name.
func newBroker(src StateSource, epoch uint64, now func() time.Time, log *zap.Logger, limits map[string]ProviderLimit) *Broker {
	b := &Broker{
		src: src, epoch: epoch, now: now, log: log,
		queues: map[queueKey]*readyQueue{}, agentsOf: map[string]map[string]struct{}{}, wild: map[string]map[*waiter]struct{}{}, ready: map[string]*queuedStep{}, lanesOf: map[string][]*lane{},
		inflight: map[string]bool{}, order: newDispatchOrder(), orders: map[string]laneOrder{},
		providers: map[string]*providerState{}, runningOf: map[string]*providerState{},
		delayed: map[dueKey]*delayItem{}, owed: map[dueKey]due{},
		queuedOn: map[string]string{}, queuedWait: map[string]string{},
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
	for name, l := range limits {
		if l.any() {
			b.addProvider(name, l)
			b.limited = true
		}
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
	for _, h := range st.ProviderHolds() {
		b.loadHoldLocked(st, h.Provider)
	}
	for _, s := range st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_QUEUED) {
		b.health.observe(s.Id, s)
		b.updateStepLocked(s.Id, s, now)
		n++
	}
	for _, s := range st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_RUNNING) {
		b.health.observe(s.Id, s)
		b.trackRunning(s.Id, s, now)
	}
	for _, s := range st.WaitingTimers() {
		b.updateStepLocked(s.Id, s, now)
		n++
	}
	for _, s := range st.ErroredToResume() {
		b.updateSessionLocked(s.Id, s, now)
		n++
	}
	n += b.loadSchedulesLocked(st, now)
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
	for _, name := range a.Providers {
		b.loadHoldLocked(st, name)
	}
	for _, id := range a.Steps {
		s := st.Step(id)
		b.health.observe(id, s)
		b.updateStepLocked(id, s, now)
	}
	for _, id := range a.Sessions {
		b.updateSessionLocked(id, st.Session(id), now)
	}
	for _, id := range a.Schedules {
		b.updateScheduleLocked(st, id, st.Schedule(id), now)
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
	b.queuedOn, b.queuedWait = map[string]string{}, map[string]string{}
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
	b.trackRunning(id, s, now)
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
	b.sessionEndedLocked(id, s)
	b.unschedule(dueResume, id)
	if at, ok := fsm.ResumeDue(s); ok {
		b.schedule(due{dueResume, id, at}, nil, now)
	}
}

func (b *Broker) queue(k queueKey) *readyQueue {
	q := b.queues[k]
	if q == nil {
		q = &readyQueue{key: k, subs: map[string]*providerQueue{}, waiters: map[*waiter]struct{}{}}
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
	l := b.laneFor(q, s)
	qs := &queuedStep{st: s, lane: l}
	heap.Push(&l.steps, qs)
	b.ready[s.Id] = qs
	b.order.readied(l.g.key.fairness) // before the group is placed: it may move the key's pass
	b.fixLane(l)                      // its head may be older now
	l.g.sub.depth++
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

// laneFor is the session's lane of s in q, made (with its provider queue
// and group) if it has none; a new lane is empty and in no heap yet.
func (b *Broker) laneFor(q *readyQueue, s *fsmpb.Step) *lane {
	o := b.orderOf(s.SessionId)
	provider := ""
	if q.key.model {
		provider = o.provider
	}
	sub := q.subs[provider]
	if sub == nil {
		sub = &providerQueue{q: q, provider: provider, groups: newGroupHeap(b.order), byGroup: map[groupKey]*group{}}
		q.subs[provider] = sub
		if p := b.provider(provider); p != nil {
			p.subs[sub] = struct{}{}
		}
	}
	gk := groupKey{priority: o.priority, fairness: o.fairness}
	g := sub.byGroup[gk]
	if g == nil {
		g = &group{sub: sub, key: gk, lanes: newLaneHeap(b.order), bySession: map[string]*lane{}, idx: -1}
		sub.byGroup[gk] = g
		b.order.addGroup(g)
	}
	l := g.bySession[s.SessionId]
	if l == nil {
		l = &lane{g: g, session: s.SessionId, weight: o.weight, idx: -1}
		g.bySession[s.SessionId] = l
		b.lanesOf[s.SessionId] = append(b.lanesOf[s.SessionId], l)
	}
	return l
}

// laneOrder is what a session's lanes are ordered by, fixed when it was
// created.
type laneOrder struct {
	priority uint32
	fairness string
	weight   uint32
	provider string
}

// orderOf is a session's order, read from the state once and kept while it
// has Steps ready (a session not created yet, or gone, has the defaults).
func (b *Broker) orderOf(session string) laneOrder {
	if o, ok := b.orders[session]; ok {
		return o
	}
	s := b.src.State().Session(session)
	if s == nil {
		return laneOrder{priority: fsm.DefaultPriority, weight: 1}
	}
	o := laneOrder{priority: fsm.Priority(s), fairness: s.FairnessKey, weight: fsm.FairnessWeight(s), provider: s.Provider}
	b.orders[session] = o
	return o
}

// fixLane puts a lane whose head or served tick changed back in order: in
// its group (pushed if it was out), and the group in its provider queue.
func (b *Broker) fixLane(l *lane) {
	g := l.g
	if l.idx < 0 {
		heap.Push(&g.lanes, l)
	} else {
		heap.Fix(&g.lanes, l.idx)
	}
	if g.idx < 0 {
		heap.Push(&g.sub.groups, g)
	} else {
		heap.Fix(&g.sub.groups, g.idx)
	}
}

// removeReadyLocked takes a Step out of its ready queue, if it is in one,
// and drops the lane, group and provider queue it leaves empty.
func (b *Broker) removeReadyLocked(id string) {
	qs := b.ready[id]
	if qs == nil {
		return
	}
	delete(b.ready, id)
	l := qs.lane
	g, sub, q := l.g, l.g.sub, l.g.sub.q
	if q.depth--; q.depth == 0 && !q.key.model {
		if ags := b.agentsOf[q.key.tool]; ags != nil {
			delete(ags, q.key.agent)
			if len(ags) == 0 {
				delete(b.agentsOf, q.key.tool)
			}
		}
	}
	sub.depth--
	b.order.unreadied(g.key.fairness)
	heap.Remove(&l.steps, qs.idx)
	if len(l.steps) > 0 {
		b.fixLane(l)
		return
	}
	heap.Remove(&g.lanes, l.idx)
	l.idx = -1
	delete(g.bySession, l.session)
	b.dropLaneOf(l)
	if len(g.lanes.items) > 0 {
		heap.Fix(&sub.groups, g.idx)
		return
	}
	heap.Remove(&sub.groups, g.idx)
	delete(sub.byGroup, g.key)
	b.order.dropGroup(g)
	if len(sub.groups.items) == 0 {
		delete(q.subs, sub.provider)
		if p := b.provider(sub.provider); p != nil {
			delete(p.subs, sub)
		}
	}
}

func (b *Broker) dropLaneOf(l *lane) {
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

// serve marks a session as served now: its lanes go behind every other of
// their groups.
func (b *Broker) serve(session string) {
	b.order.tick++
	b.order.served[session] = b.order.tick
	for _, l := range b.lanesOf[session] {
		b.fixLane(l)
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
// with ready Steps of it. A provider queue whose provider is held or at a
// limit is skipped; until is the earliest time one of those frees (0: none
// does by the clock alone).
func (b *Broker) bestLane(keys []interest, now int64) (best *lane, until int64) {
	consider := func(k queueKey) {
		b.visits++
		q := b.queues[k]
		if q == nil || q.depth == 0 {
			return
		}
		for name, sub := range q.subs {
			l := sub.best()
			if l == nil {
				continue
			}
			if p := b.provider(name); p != nil {
				if blocked, at := p.blocked(now); blocked {
					if at > 0 && (until == 0 || at < until) {
						until = at
					}
					continue
				}
			}
			if best == nil || b.order.lanesLess(l, best) {
				best = l
			}
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
	return best, until
}

// takeFor picks up to max ready Steps for worker from the queues of keys in
// dispatch order (lanesLess), and in queue order within a session, and puts
// them in flight. Steps refused twice to this poll are left alone, and so
// are Steps the Worker should leave to another one (passOn). When it finds
// nothing and wait is set, it registers a waiter on those queues in the same
// critical section, so no Step that becomes ready later is missed.
func (b *Broker) takeFor(worker string, keys []interest, max int, refused map[string]int, wait bool) ([]*fsmpb.Step, *waiter, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.deposed {
		return nil, nil, ErrNotLeader
	}
	now := b.now().UnixMilli()
	var recheck int64
	later := func(at int64) {
		if at > 0 && (recheck == 0 || at < recheck) {
			recheck = at
		}
	}
	var out, skipped []*fsmpb.Step
	for len(out) < max {
		best, freed := b.bestLane(keys, now)
		later(freed)
		if best == nil {
			break
		}
		s := best.head()
		fairness, weight, p := best.g.key.fairness, best.weight, b.provider(best.g.sub.provider)
		pass, again := b.passOn(worker, s, best.queue(), now)
		b.removeReadyLocked(s.Id)
		if refused[s.Id] >= 2 || pass {
			later(again)
			skipped = append(skipped, s)
			continue
		}
		out = append(out, s)
		b.inflight[s.Id] = true
		b.serve(s.SessionId)
		b.order.charge(fairness, weight)
		b.took(p, s.Id, now)
	}
	for _, s := range skipped {
		b.pushReady(s, false)
	}
	b.order.prune(b.lanesOf)
	if len(b.orders) > 4096 && len(b.orders) > 4*len(b.lanesOf) {
		for id := range b.orders {
			if b.lanesOf[id] == nil {
				delete(b.orders, id) // read again when it has Steps again
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
