// Package dispatch is the leader's hand-out of Steps to Workers: long polls,
// fair across sessions, that return a task only once its StartAttempt is
// committed; and the timer wheel that proposes due timers and error resumes.
// It runs only on the node that holds the dispatch lease.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
)

// Proposer commits a command through Raft and returns the state machine's
// result (the leader's Pipeline in production).
type Proposer interface {
	Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error)
}

// StateSource gives the replicated state as this node applied it.
type StateSource interface {
	State() *fsm.State
}

// Deadlines is the attempt deadlines as dispatch uses them (lease.Deadlines):
// an attempt it started gets its heartbeat deadline, and StartAttempt
// carries the default run timeout.
type Deadlines interface {
	Arm(stepID string, attempt uint32)
	DefaultRunTimeout() time.Duration
	HeartbeatInterval() time.Duration
	HeartbeatTimeout() time.Duration
}

// ErrNotLeader: this node does not hold the dispatch lease (or lost it while
// the poll was open). The API answers Unavailable with the leader's address.
var ErrNotLeader = errors.New("dispatch: this node does not hold the dispatch lease")

// ErrUnknownWorker: the Worker never registered. The API answers
// FailedPrecondition ("register first").
var ErrUnknownWorker = errors.New("dispatch: unknown worker: register first")

// proposeTimeout bounds one StartAttempt proposal.
const proposeTimeout = 10 * time.Second

// DefaultMaxWait caps how long one poll waits.
const DefaultMaxWait = 30 * time.Second

// Config tunes dispatch.
type Config struct {
	// MaxWait caps the wait of a poll.
	MaxWait time.Duration
	// Now is the clock (time.Now when nil); it stamps proposed commands.
	Now func() time.Time
	// PreferOtherWait: how long a Step is kept from a Worker that should
	// leave it to another (DefaultPreferOtherWait when 0).
	PreferOtherWait time.Duration
	// OnHandedOver, when set, hears each task handed to a Worker, its
	// StartAttempt committed (metrics).
	OnHandedOver func(st *fsmpb.Step, at *fsmpb.Attempt)
	// Providers are the providers' limits, by name (dexd --provider-limit);
	// AgentProviders the agents' providers (dexd --agent-provider), which a
	// session created by the command being proposed will have.
	Providers      map[string]ProviderLimit
	AgentProviders map[string]string
	// Partitions is the cluster's partition count (0 or 1: one): the
	// timer wheel draws each scheduled session's id in partition 0, which
	// holds the schedules.
	Partitions int
}

func (c Config) withDefaults() Config {
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PreferOtherWait <= 0 {
		c.PreferOtherWait = DefaultPreferOtherWait
	}
	return c
}

// run is one poll's (or one pipelined hand-out's) view of the dispatch
// term it entered: Stop waits until it leaves.
type run struct {
	epoch uint64
	b     *Broker         // the term's ready queues; it keeps the Steps in flight
	ctx   context.Context // ends when dispatch stops
	t     *lease.Term
}

// leave ends the run's part in its term.
func (r *run) leave() { r.t.Leave() }

// Dispatcher hands queued Steps to polling Workers. It is a leader service,
// started after Queues, whose broker it hands out from.
type Dispatcher struct {
	p         Proposer
	src       StateSource
	queues    *Queues
	deadlines Deadlines
	cfg       Config
	log       *zap.Logger

	fence lease.Fence // the term: its open polls and pipelined hand-outs
}

// New returns a stopped Dispatcher: every Poll fails with ErrNotLeader until
// it is established.
func New(p Proposer, src StateSource, queues *Queues, deadlines Deadlines, cfg Config, log *zap.Logger) *Dispatcher {
	if log == nil {
		log = zap.NewNop()
	}
	return &Dispatcher{p: p, src: src, queues: queues, deadlines: deadlines, cfg: cfg.withDefaults(), log: log.Named("dispatch")}
}

// EstablishLeadership begins dispatching under an epoch from the term's
// broker (stopping an earlier term first).
func (d *Dispatcher) EstablishLeadership(_ context.Context, epoch uint64) error {
	if d.queues.current() == nil {
		return errors.New("dispatch: the ready queues are not loaded")
	}
	d.fence.Open(epoch)
	d.log.Info("dispatch started", zap.Uint64("epoch", epoch))
	return nil
}

// RevokeLeadership ends dispatching at once: every open poll returns
// ErrNotLeader (or the tasks it already committed). It returns when no poll
// proposes any more.
func (d *Dispatcher) RevokeLeadership() {
	if t := d.fence.Close(nil); t != nil {
		d.log.Info("dispatch stopped", zap.Uint64("epoch", t.Epoch))
	}
}

// Drain stops dispatching on a leader that hands over: open polls get
// ErrNotLeader, so Workers hear Unavailable and poll again elsewhere.
func (d *Dispatcher) Drain() { d.RevokeLeadership() }

// WorkerHealth is the Worker health of the running term's broker (nil when
// stopped: only the leader keeps it).
func (d *Dispatcher) WorkerHealth() []*dexv1.WorkerHealth {
	r, err := d.begin()
	if err != nil {
		return nil
	}
	defer r.leave()
	return r.b.WorkerHealth()
}

// Providers is the broker's report of the providers (nil when not leading).
func (d *Dispatcher) Providers() []*dexv1.ProviderStatus {
	r, err := d.begin()
	if err != nil {
		return nil
	}
	defer r.leave()
	return r.b.Providers()
}

// Epoch is the epoch dispatch runs under (0 when stopped).
func (d *Dispatcher) Epoch() uint64 { return d.fence.Epoch() }

// begin enters the dispatch term: the caller leaves the run when done.
func (d *Dispatcher) begin() (*run, error) {
	t := d.fence.Enter()
	if t == nil {
		return nil, ErrNotLeader
	}
	b := d.queues.current()
	if b == nil {
		t.Leave()
		return nil, ErrNotLeader
	}
	return &run{epoch: t.Epoch, b: b, ctx: t.Context(), t: t}, nil
}

// Poll long-polls for up to max tasks (1 when max <= 0) for a registered
// Worker. It returns as soon as it has started at least one attempt; else it
// waits until a Step it can take becomes ready (queued, or at the end of its
// backoff), or for wait (capped at MaxWait; wait <= 0 does not wait) and
// returns no task. A
// task is returned only after its StartAttempt committed, and its attempt
// deadline is armed.
func (d *Dispatcher) Poll(ctx context.Context, workerID string, maxTasks int, wait time.Duration) ([]*dexv1.Task, error) {
	r, err := d.begin()
	if err != nil {
		return nil, err
	}
	defer r.leave()
	caller := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.ctx, cancel)()
	if maxTasks <= 0 {
		maxTasks = 1
	}
	// refused counts the Steps the state machine refused to this poll; one
	// refused twice is left alone, so a poll never spins on it.
	refused := map[string]int{}
	wait = max(min(wait, d.cfg.MaxWait), 0)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()

	for {
		p, err := d.pick(r, workerID, maxTasks, refused, wait > 0)
		if err != nil {
			return nil, err
		}
		picked := p.steps
		tasks, err := d.startAll(ctx, r, p.worker, picked, refused)
		if len(tasks) > 0 {
			return tasks, nil
		}
		if err != nil {
			return nil, err
		}
		if len(picked) > 0 {
			continue // every pick was refused: look again
		}
		if p.waiter == nil {
			return nil, nil
		}
		tasks, timedOut, err := d.waitReady(ctx, caller, r, p.waiter, deadline.C)
		if len(tasks) > 0 {
			return tasks, nil
		}
		if timedOut || err != nil {
			return nil, err
		}
	}
}

// waitReady waits until the broker wakes the poll's waiter or for the
// poll's deadline (timedOut). A poll woken with an offer (pair.go) waits
// for its StartAttempt and returns its task, even past the deadline, and
// even when the term ends meanwhile (a drain): the attempt may commit, and
// only the Worker that polls can run it. Only the caller's going away
// (caller) drops it.
func (d *Dispatcher) waitReady(ctx, caller context.Context, r *run, w *waiter, deadline <-chan time.Time) (tasks []*dexv1.Task, timedOut bool, err error) {
	var recheck <-chan time.Time
	if w.recheck > 0 {
		t := time.NewTimer(w.recheck)
		defer t.Stop()
		recheck = t.C
	}
	select {
	case <-w.ch:
	case <-recheck: // a Step left for another Worker may be this one's now
	case <-deadline:
		timedOut = true
	case <-ctx.Done():
		err = ctx.Err()
	}
	if off := r.b.settle(w); off != nil && caller.Err() == nil {
		select {
		case tasks = <-off.tasks:
			if len(tasks) > 0 {
				return tasks, false, nil
			}
		case <-caller.Done():
			err = caller.Err()
		}
	}
	if err != nil && r.ctx.Err() != nil {
		err = ErrNotLeader
	}
	return tasks, timedOut, err
}

// Takes reports whether a Worker may run a Step: model Steps on Workers that
// run the model of the Step's agent, tool Steps on Workers that registered
// the tool for that agent (or for every agent). Waits are never dispatched.
// The broker's ready queues follow the same rule.
func Takes(w *fsmpb.WorkerInfo, st *fsmpb.Step) bool {
	k, ok := keyOf(st)
	return ok && slices.ContainsFunc(workerKeys(w), func(i interest) bool { return i.covers(k) })
}

// picked is what one look at the broker found for a poller.
type picked struct {
	worker *fsmpb.WorkerInfo
	steps  []*fsmpb.Step
	// waiter is woken when a Step the Worker takes becomes ready (nil when
	// something was picked or the poll does not wait).
	waiter *waiter
}

// pick chooses up to maxTasks ready Steps the Worker may take from the
// broker, marking them in flight. Sessions take turns, least recently
// served first; within a session Steps go in queue order.
func (d *Dispatcher) pick(r *run, workerID string, maxTasks int, refused map[string]int, wait bool) (*picked, error) {
	st := d.src.State()
	if e := st.Meta().Epoch; e != r.epoch {
		// A newer leader opened an epoch: this node is deposed and every
		// StartAttempt it proposed would be refused.
		return nil, fmt.Errorf("%w: epoch %d was replaced by %d", ErrNotLeader, r.epoch, e)
	}
	w := st.Worker(workerID)
	if w == nil {
		return nil, fmt.Errorf("%w: worker %q", ErrUnknownWorker, workerID)
	}
	steps, waiter, err := r.b.takeFor(w.Id, workerKeys(w), maxTasks, refused, wait)
	if err != nil {
		return nil, err
	}
	return &picked{worker: w, steps: steps, waiter: waiter}, nil
}

// done takes a Step out of flight, once its StartAttempt was applied (or
// will not be proposed).
func (d *Dispatcher) done(r *run, stepID string) { r.b.release(stepID) }

// startAll proposes StartAttempt for each picked Step, in order, and builds
// the tasks of those that committed. A Step another poller took is skipped.
func (d *Dispatcher) startAll(ctx context.Context, r *run, w *fsmpb.WorkerInfo, picked []*fsmpb.Step, refused map[string]int) ([]*dexv1.Task, error) {
	// The StartAttempts of one poll are proposed together, so raft commits
	// them in one batch instead of one round trip each.
	type started struct {
		at  *fsmpb.Attempt
		err error
	}
	results := make([]started, len(picked))
	var wg sync.WaitGroup
	for i, s := range picked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer d.done(r, s.Id)
			if ctx.Err() != nil {
				results[i].err = ctx.Err()
				return
			}
			results[i].at, results[i].err = d.start(ctx, r, w, s)
		}()
	}
	wg.Wait()
	var tasks []*dexv1.Task
	var firstErr error
	st := d.src.State()
	for i, s := range picked {
		switch res := results[i]; {
		case res.err != nil:
			if firstErr == nil {
				firstErr = res.err
			}
		case res.at != nil:
			tasks = append(tasks, d.handOver(st, s, res.at, r.epoch))
		default:
			refused[s.Id]++
		}
	}
	if len(tasks) > 0 {
		// Tasks whose attempts committed are handed out even if another
		// proposal of the same poll failed; the Worker polls again.
		return tasks, nil
	}
	if firstErr != nil && r.ctx.Err() != nil {
		return nil, ErrNotLeader
	}
	if firstErr == nil && ctx.Err() != nil {
		if r.ctx.Err() != nil {
			return nil, ErrNotLeader
		}
		return nil, ctx.Err()
	}
	return nil, firstErr
}

// handOver builds the task of a committed attempt and reports it.
func (d *Dispatcher) handOver(st *fsm.State, s *fsmpb.Step, at *fsmpb.Attempt, epoch uint64) *dexv1.Task {
	t := d.task(st, s, at, epoch)
	if d.cfg.OnHandedOver != nil {
		d.cfg.OnHandedOver(s, at)
	}
	return t
}

// start proposes the next attempt of a Step. The attempt is nil when the
// state machine refused it (the Step is no longer queued).
func (d *Dispatcher) start(ctx context.Context, r *run, w *fsmpb.WorkerInfo, s *fsmpb.Step) (*fsmpb.Attempt, error) {
	n := uint32(len(s.Attempts)) + 1
	// The proposal outlives the poll and the term: if the Worker goes away
	// while it is in flight, the attempt may still commit and must get its
	// deadline; if the term ends for a drain, the node still leads, the
	// attempt may commit and the poll hands it out. Raft itself fails it
	// when the leadership is lost.
	pctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	res, err := d.p.Propose(pctx, &fsmpb.Command{NowMs: d.cfg.Now().UnixMilli(), Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: s.Id, Attempt: n, WorkerId: w.Id, Epoch: r.epoch,
		DefaultRunTimeoutMs: uint32(d.deadlines.DefaultRunTimeout().Milliseconds()),
	}}})
	if err != nil {
		d.log.Warn("proposing StartAttempt failed", zap.String("step", s.Id), zap.Uint32("attempt", n), zap.Error(err))
		return nil, err
	}
	if res.Err != nil {
		d.log.Debug("StartAttempt refused", zap.String("step", s.Id), zap.Uint32("attempt", n), zap.String("reason", res.Err.Error()))
		return nil, nil
	}
	d.deadlines.Arm(s.Id, res.Attempt.N)
	d.log.Debug("attempt started", zap.String("step", s.Id), zap.Uint32("attempt", n), zap.String("worker", w.Id))
	return res.Attempt, nil
}
