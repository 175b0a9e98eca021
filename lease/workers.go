package lease

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Defaults of WorkersConfig.
const (
	DefaultWorkerTTL = time.Minute
	// DefaultToolWait: a queued Step waits for a Worker as long as it
	// takes, saying why (fsm.State.WaitingReason); it does not fail.
	DefaultToolWait time.Duration = 0
)

// WorkersConfig tunes the Worker liveness of the leader.
type WorkersConfig struct {
	// TTL: a Worker that neither polls nor heartbeats for this long is
	// deregistered; also the grace a new leader gives every Worker.
	TTL time.Duration
	// ToolWait: a queued Step whose tool no live Worker serves for this long
	// fails as an unknown tool. 0 (the default) never fails it: it waits
	// until a Worker that serves it comes.
	ToolWait time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (c WorkersConfig) withDefaults() WorkersConfig {
	if c.TTL <= 0 {
		c.TTL = DefaultWorkerTTL
	}
	if c.ToolWait < 0 {
		c.ToolWait = 0
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Workers keeps the registered Workers' last signs of life in the leader's
// memory, deregisters (through Raft) those silent for the TTL, and, with a
// tool wait set, fails the queued Steps of tools no live Worker served for
// that long. It is a
// leader service: a new leader gives every Worker and every unserved tool a
// full period again, as the attempt deadlines get their grace.
type Workers struct {
	p      Proposer
	src    StateSource
	queues ReadyQueues // nil: none
	cfg    WorkersConfig
	log    *zap.Logger

	fence Fence // the term: its watch

	mu   sync.Mutex
	seen map[string]time.Time // worker id -> last poll or heartbeat
	open map[string]int       // worker id -> polls open now (alive while waiting)
	// unserved: tools with no live Worker, since when this leader knows it.
	unserved map[string]time.Time
	served   map[string]bool // the catalog at the last look
	// unservedQ: ready queues no live Worker serves for their agent, since
	// when this leader knows it.
	unservedQ map[ReadyQueue]time.Time
}

// ReadyQueues lists the broker's non-empty ready queues (dispatch.Queues):
// a queue no live Worker serves for its agent fails its Steps after the
// tool wait too.
type ReadyQueues interface {
	ReadyQueues() []ReadyQueue
}

// NewWorkers returns a Workers that is not established. queues may be nil:
// then only the tools no Worker serves at all fail their Steps.
func NewWorkers(p Proposer, src StateSource, queues ReadyQueues, cfg WorkersConfig, log *zap.Logger) *Workers {
	if log == nil {
		log = zap.NewNop()
	}
	return &Workers{p: p, src: src, queues: queues, cfg: cfg.withDefaults(), log: log.Named("workers")}
}

// Touch records a sign of life of a Worker (a poll or a heartbeat).
func (w *Workers) Touch(workerID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fence.Current() != nil {
		w.seen[workerID] = w.cfg.Now()
	}
}

// Polling marks a Worker alive while its long poll is open; call done when
// the poll returns.
func (w *Workers) Polling(workerID string) (done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.fence.Current()
	if t == nil {
		return func() {}
	}
	w.seen[workerID] = w.cfg.Now()
	w.open[workerID]++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.fence.Current() != t {
			return
		}
		w.seen[workerID] = w.cfg.Now()
		if w.open[workerID]--; w.open[workerID] <= 0 {
			delete(w.open, workerID)
		}
	}
}

// EstablishLeadership gives every registered Worker, and every tool of a
// queued, running or approval-waiting Step that no Worker serves, one full
// period from now, then starts the watch.
func (w *Workers) EstablishLeadership(ctx context.Context, epoch uint64) error {
	w.RevokeLeadership()
	st := w.src.State()
	now := w.cfg.Now()
	w.mu.Lock()
	w.seen, w.open, w.unserved, w.served = map[string]time.Time{}, map[string]int{}, map[string]time.Time{}, map[string]bool{}
	w.unservedQ = map[ReadyQueue]time.Time{}
	for _, wk := range st.Workers() {
		w.seen[wk.Id] = now
	}
	for _, tool := range st.Tools() {
		w.served[tool.Name] = true
	}
	// Once per term: the tools Steps wait on that nobody serves now.
	for _, status := range []fsmpb.StepStatus{fsmpb.StepStatus_STEP_STATUS_QUEUED, fsmpb.StepStatus_STEP_STATUS_RUNNING, fsmpb.StepStatus_STEP_STATUS_WAITING} {
		for _, s := range st.StepsWithStatus(status) {
			if s.Tool != "" && s.Kind != fsmpb.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER && s.Kind != fsmpb.StepKind_STEP_KIND_AWAIT_TIMER && !w.served[s.Tool] {
				w.unserved[s.Tool] = now
			}
		}
	}
	w.log.Info("worker liveness established", zap.Uint64("epoch", epoch), zap.Int("workers", len(w.seen)),
		zap.Int("unserved_tools", len(w.unserved)), zap.Duration("ttl", w.cfg.TTL), zap.Duration("tool_wait", w.cfg.ToolWait))
	w.mu.Unlock()
	// Opened once the maps are in place: Touch and Polling see no term before.
	t := w.fence.Open(epoch)
	t.Go(func() { w.loop(t) })
	return nil
}

// RevokeLeadership stops the watch; nothing of it proposes after it returns.
func (w *Workers) RevokeLeadership() { w.fence.Close(nil) }

// Drain stops the watch on a leader that hands over: it deregisters and
// fails nothing more.
func (w *Workers) Drain() { w.RevokeLeadership() }

func (w *Workers) loop(t *Term) {
	period := w.cfg.TTL
	if w.cfg.ToolWait > 0 {
		period = min(period, w.cfg.ToolWait)
	}
	every := min(max(period/4, 10*time.Millisecond), time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		for _, cmd := range w.due(t) {
			w.propose(t, cmd)
		}
		select {
		case <-t.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// due looks at the state and the signs of life and returns what to propose.
func (w *Workers) due(t *Term) []*fsmpb.Command {
	st := w.src.State()
	if st.Meta().Epoch != t.Epoch {
		return nil // deposed: every proposal would be refused
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fence.Current() != t {
		return nil
	}
	now := w.cfg.Now()
	var out []*fsmpb.Command
	registered := map[string]bool{}
	for _, wk := range st.Workers() {
		registered[wk.Id] = true
		last, ok := w.seen[wk.Id]
		if !ok {
			w.seen[wk.Id] = now // registered since the last look
			continue
		}
		if w.open[wk.Id] == 0 && now.Sub(last) >= w.cfg.TTL {
			out = append(out, &fsmpb.Command{NowMs: now.UnixMilli(), Body: &fsmpb.Command_DeregisterWorker{DeregisterWorker: &fsmpb.DeregisterWorker{
				WorkerId: wk.Id, Epoch: t.Epoch,
			}}})
		}
	}
	for id := range w.seen {
		if !registered[id] && w.open[id] == 0 {
			delete(w.seen, id)
		}
	}
	if w.cfg.ToolWait == 0 {
		return out // queued Steps wait for their Workers as long as it takes
	}

	served := map[string]bool{}
	for _, tool := range st.Tools() {
		served[tool.Name] = true
		delete(w.unserved, tool.Name)
	}
	for name := range w.served {
		if !served[name] {
			w.unserved[name] = now // its last Worker went
		}
	}
	w.served = served
	for name, since := range w.unserved {
		for _, s := range st.QueuedStepsOfTool(name) {
			from := since
			if ready := time.UnixMilli(s.ReadyAtMs); ready.After(from) {
				from = ready // queued (or requeued) after its tool went
			}
			if waited := now.Sub(from); waited >= w.cfg.ToolWait {
				out = append(out, &fsmpb.Command{NowMs: now.UnixMilli(), Body: &fsmpb.Command_FailUnservedStep{FailUnservedStep: &fsmpb.FailUnservedStep{
					StepId: s.Id, Epoch: t.Epoch, WaitedMs: uint64(waited.Milliseconds()),
				}}})
			}
		}
	}
	return append(out, w.unservedQueues(t, st, served, now)...)
}

func (w *Workers) propose(t *Term, cmd *fsmpb.Command) {
	if d := cmd.GetDeregisterWorker(); d != nil && w.aliveAgain(d.WorkerId) {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := w.p.Propose(ctx, cmd)
	log := w.log.With(zap.Uint64("epoch", t.Epoch))
	if d := cmd.GetDeregisterWorker(); d != nil {
		log = log.With(zap.String("worker", d.WorkerId))
	} else {
		log = log.With(zap.String("step", cmd.GetFailUnservedStep().GetStepId()))
	}
	switch {
	case err != nil:
		if t.Context().Err() == nil {
			log.Warn("proposing failed; retrying on the next look", zap.Error(err))
		}
	case res.Err != nil:
		log.Debug("refused", zap.String("reason", res.Err.Error()))
	case cmd.GetDeregisterWorker() != nil:
		log.Info("worker deregistered: no poll or heartbeat within the TTL", zap.Duration("ttl", w.cfg.TTL))
		w.mu.Lock()
		delete(w.seen, cmd.GetDeregisterWorker().WorkerId)
		w.mu.Unlock()
	default:
		log.Info("queued step failed: no live Worker served its tool or agent within the tool wait", zap.Duration("tool_wait", w.cfg.ToolWait))
	}
}

// aliveAgain: the Worker polled or heartbeated since it was found silent.
func (w *Workers) aliveAgain(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.seen[id]
	return w.open[id] > 0 || (ok && w.cfg.Now().Sub(last) < w.cfg.TTL)
}
