// Attempt deadlines: every running attempt has, in the leader's memory only,
// a heartbeat deadline that its Worker's heartbeats push forward; when it
// passes the leader proposes ExpireAttempt through Raft. A new leader re-arms
// a deadline for every running attempt with a grace period (TakeoverGrace:
// what a Worker needs to notice the old leader is gone and reach the new one,
// with margin, and at least a heartbeat timeout), so a Worker that reattaches
// to it in time keeps its attempt (as Nomad's heartbeat TTLs are re-armed
// for its nodes). An attempt that also has a run deadline (stored in the
// state when it started) is timed out at that deadline, heartbeats or not:
// the leader proposes TimeoutAttempt.

package lease

import (
	"context"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Proposer commits a command through Raft and returns the state machine's
// result (the cluster node in production).
type Proposer interface {
	Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error)
}

// StateSource gives the replicated state as this node applied it.
type StateSource interface {
	State() *fsm.State
}

// Defaults of DeadlinesConfig.
const (
	DefaultHeartbeatTimeout  = 10 * time.Second
	DefaultHeartbeatInterval = 2 * time.Second
	// DefaultRunTimeout is generous on purpose: it only bounds a handler
	// that hangs while heartbeating, and work that runs longer belongs in a
	// long-running tool (a task that is polled) or a registered run timeout.
	DefaultRunTimeout = time.Hour
	// MaxRunTimeout is the longest run timeout a command can carry (ms in
	// 32 bits).
	MaxRunTimeout = time.Duration(math.MaxUint32) * time.Millisecond
)

// DeadlinesConfig tunes the attempt deadlines.
type DeadlinesConfig struct {
	// HeartbeatTimeout is how long an attempt lives without a heartbeat.
	HeartbeatTimeout time.Duration
	// TakeoverGrace is how long a new leader gives every running attempt
	// before its first heartbeat. 0: TakeoverGrace(HeartbeatInterval,
	// HeartbeatTimeout), what a Worker of the Go library needs; set it only
	// for Workers known to reattach faster (tests).
	TakeoverGrace time.Duration
	// HeartbeatInterval is how often Workers are told to heartbeat.
	HeartbeatInterval time.Duration
	// Now is the clock (time.Now when nil). Deadlines are measured with it and
	// it stamps the commands this package proposes.
	Now func() time.Time
	// DefaultRunTimeout is the run timeout of an attempt whose Step's policy
	// names none (0: no limit). Dispatch puts it in StartAttempt.
	DefaultRunTimeout time.Duration
}

func (c DeadlinesConfig) withDefaults() DeadlinesConfig {
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.HeartbeatInterval > c.HeartbeatTimeout {
		c.HeartbeatInterval = c.HeartbeatTimeout
	}
	if c.TakeoverGrace <= 0 {
		c.TakeoverGrace = TakeoverGrace(c.HeartbeatInterval, c.HeartbeatTimeout)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

type key struct {
	step    string
	attempt uint32
}

// entry is one attempt's deadlines. Its timer fires at the deadline it was set for;
// a heartbeat only moves the deadline, and a timer that fires early re-arms
// itself for the rest, so a timer is never reset while its function runs.
type entry struct {
	deadline time.Time
	// run is the attempt's run deadline (zero: none); heartbeats do not move it.
	run   time.Time
	timer *time.Timer
	// expiring: a deadline passed and ExpireAttempt (or TimeoutAttempt, when
	// timedOut) is being proposed; a heartbeat can no longer save the attempt.
	expiring bool
	timedOut bool
}

// next is when the entry's timer should fire: the earlier deadline.
func (e *entry) next() time.Time {
	if !e.run.IsZero() && e.run.Before(e.deadline) {
		return e.run
	}
	return e.deadline
}

// Deadlines holds the attempt deadlines of the leader.
type Deadlines struct {
	p   Proposer
	src StateSource
	cfg DeadlinesConfig
	log *zap.Logger

	fence Fence // the term: its sweep and the expiry proposals in flight

	mu        sync.Mutex
	deadlines map[key]*entry
}

// New returns a Deadlines that is not established: it arms nothing until
// Establish.
func NewDeadlines(p Proposer, src StateSource, cfg DeadlinesConfig, log *zap.Logger) *Deadlines {
	if log == nil {
		log = zap.NewNop()
	}
	return &Deadlines{p: p, src: src, cfg: cfg.withDefaults(), log: log.Named("deadlines"), deadlines: map[key]*entry{}}
}

// HeartbeatInterval is how often Workers are told to heartbeat.
func (m *Deadlines) HeartbeatInterval() time.Duration { return m.cfg.HeartbeatInterval }

// HeartbeatTimeout is how long an attempt lives without a heartbeat.
func (m *Deadlines) HeartbeatTimeout() time.Duration { return m.cfg.HeartbeatTimeout }

// TakeoverGrace is how long a new leader gives a running attempt before
// its first heartbeat.
func (m *Deadlines) TakeoverGrace() time.Duration { return m.cfg.TakeoverGrace }

// DefaultRunTimeout is the run timeout of a Step whose policy names none.
func (m *Deadlines) DefaultRunTimeout() time.Duration { return m.cfg.DefaultRunTimeout }

// Establish starts the deadlines of a new leader for a dispatch epoch: every
// attempt running in the state gets one with the takeover grace, so a
// Worker that reattaches within it keeps its attempt. A Deadlines
// that was established already is revoked first.
func (m *Deadlines) Establish(_ context.Context, epoch uint64) {
	m.Revoke()
	running := m.src.State().StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_RUNNING)
	t := m.fence.Open(epoch)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.armMissingLocked(t, running)
	m.log.Info("attempt deadlines established", zap.Uint64("epoch", epoch), zap.Int("running_attempts", len(m.deadlines)),
		zap.Duration("grace", m.cfg.TakeoverGrace))
	t.Go(func() { m.sweep(t) })
}

// EstablishLeadership is Establish as a leader service of the runtime.
func (m *Deadlines) EstablishLeadership(ctx context.Context, epoch uint64) error {
	m.Establish(ctx, epoch)
	return nil
}

// RevokeLeadership is Revoke as a leader service of the runtime.
func (m *Deadlines) RevokeLeadership() { m.Revoke() }

// Drain drops every deadline on a leader that hands over: this node fails no
// attempt any more, and one still running when it hands over is re-armed by
// the next leader with its grace period.
func (m *Deadlines) Drain() { m.Revoke() }

// sweep arms a deadline for every running attempt that has none, so no attempt
// can stay running forever: a StartAttempt whose proposer gave up waiting
// (its poller went away) may still have committed without Arm being called.
func (m *Deadlines) sweep(t *Term) {
	every := max(m.cfg.HeartbeatTimeout/2, 10*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-t.Context().Done():
			return
		case <-tick.C:
		}
		running := m.src.State().StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_RUNNING)
		m.mu.Lock()
		if m.fence.Current() != t {
			m.mu.Unlock()
			return
		}
		for _, k := range m.armMissingLocked(t, running) {
			m.log.Warn("running attempt had no deadline; armed", zap.String("step", k.step), zap.Uint32("attempt", k.attempt))
		}
		m.mu.Unlock()
	}
}

// armMissingLocked gives every running attempt of steps that has no deadline
// one with the takeover grace (such an attempt may have been started by the
// previous leader), and returns those it armed. m.mu is held.
func (m *Deadlines) armMissingLocked(t *Term, steps []*fsmpb.Step) []key {
	var armed []key
	deadline := m.cfg.Now().Add(m.cfg.TakeoverGrace)
	for _, st := range steps {
		n := len(st.Attempts)
		if n == 0 || st.Attempts[n-1].Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
			continue
		}
		k := key{st.Id, uint32(n)}
		if _, ok := m.deadlines[k]; !ok {
			m.armLocked(t, k, deadline, runDeadline(st.Attempts[n-1]))
			armed = append(armed, k)
		}
	}
	return armed
}

// Revoke stops every deadline at once and forgets them. No proposal of this
// Deadlines is in flight or starts after Revoke returns.
func (m *Deadlines) Revoke() {
	t := m.fence.Close(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for k, e := range m.deadlines {
			e.timer.Stop()
			delete(m.deadlines, k)
		}
	})
	if t != nil {
		m.log.Info("attempt deadlines revoked", zap.Uint64("epoch", t.Epoch))
	}
}

// Epoch is the dispatch epoch the Deadlines is established for (0 when not).
func (m *Deadlines) Epoch() uint64 { return m.fence.Epoch() }

// Armed is the number of deadlines held.
func (m *Deadlines) Armed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.deadlines)
}

// Arm starts the deadline of an attempt that was just started, with a full
// heartbeat timeout. It does nothing when the Deadlines is not established.
func (m *Deadlines) Arm(stepID string, attempt uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.fence.Current()
	if t == nil {
		return
	}
	var run time.Time
	if st := m.src.State().Step(stepID); st != nil && attempt > 0 && int(attempt) <= len(st.Attempts) {
		run = runDeadline(st.Attempts[attempt-1])
	}
	m.armLocked(t, key{stepID, attempt}, m.cfg.Now().Add(m.cfg.HeartbeatTimeout), run)
}

// Release drops the deadline of an attempt that ended (its Complete or Fail
// committed).
func (m *Deadlines) Release(stepID string, attempt uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{stepID, attempt}
	if e, ok := m.deadlines[k]; ok && !e.expiring {
		e.timer.Stop()
		delete(m.deadlines, k)
	}
}

// Heartbeat keeps a Worker's attempt alive. It reports cancelled, with the
// reason, when the attempt is no longer the Step's current running attempt
// (it was replaced, it expired, or the Step ended): the Worker must stop it.
// Otherwise the deadline is pushed by a heartbeat timeout (armed if this
// leader did not know it yet). An attempt past its run deadline is cancelled
// whatever its heartbeats, and its timeout proposed at once.
func (m *Deadlines) Heartbeat(ref *dexv1.AttemptRef) (cancelled bool, reason string) {
	at, reason := m.check(ref)
	if reason != "" {
		return true, reason
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{ref.GetStepId(), ref.GetAttempt()}
	run := runDeadline(at)
	t := m.fence.Current()
	if t != nil {
		m.armLocked(t, k, m.cfg.Now().Add(m.cfg.HeartbeatTimeout), run)
	}
	e, ok := m.deadlines[k]
	if ok && t != nil && !e.expiring && !e.run.IsZero() && !m.cfg.Now().Before(e.run) {
		m.endLocked(t, k, e, true)
	}
	switch {
	case ok && e.expiring && e.timedOut:
		return true, fsm.RunTimeoutError(at) + ": the cluster is failing it"
	case ok && e.expiring:
		return true, "the attempt's lease expired: the cluster is failing it"
	case !ok && !run.IsZero() && !m.cfg.Now().Before(run):
		// Not established: no deadline to end it, but the Worker must stop.
		return true, fsm.RunTimeoutError(at)
	}
	return false, ""
}

// runDeadline is an attempt's stored run deadline (zero: none).
func runDeadline(at *fsmpb.Attempt) time.Time {
	if at.GetDeadlineMs() == 0 {
		return time.Time{}
	}
	return time.UnixMilli(at.DeadlineMs)
}

// check returns the running current attempt ref names, or why ref names none.
func (m *Deadlines) check(ref *dexv1.AttemptRef) (*fsmpb.Attempt, string) {
	if ref == nil || ref.StepId == "" {
		return nil, "no attempt named"
	}
	st := m.src.State().Step(ref.StepId)
	if st == nil {
		return nil, "step " + ref.StepId + " does not exist"
	}
	n := uint32(len(st.Attempts))
	switch {
	case ref.Attempt == 0 || ref.Attempt > n:
		return nil, "step " + st.Id + " has no such attempt"
	case st.Attempts[ref.Attempt-1].Token != ref.Token:
		return nil, "the attempt token does not match"
	case ref.Attempt < n:
		return nil, "the attempt was replaced by a later attempt"
	}
	at := st.Attempts[n-1]
	switch at.Status {
	case fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING:
		return at, ""
	case fsmpb.AttemptStatus_ATTEMPT_STATUS_EXPIRED:
		return nil, "the attempt expired: its heartbeats stopped"
	case fsmpb.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED:
		return nil, "the attempt already completed"
	case fsmpb.AttemptStatus_ATTEMPT_STATUS_CANCELLED:
		return nil, "the attempt was cancelled: " + at.Error
	}
	if at.ErrorType == fsmpb.ErrorType_ERROR_TYPE_TIMEOUT && at.Error != "" {
		return nil, "the attempt already ended: " + at.Error
	}
	return nil, "the attempt already ended (" + at.Status.String() + ")"
}

// armLocked sets an attempt's heartbeat deadline, creating it with its run
// deadline (zero: none) if needed. m.mu is held.
func (m *Deadlines) armLocked(t *Term, k key, deadline, run time.Time) {
	if e, ok := m.deadlines[k]; ok {
		if !e.expiring && deadline.After(e.deadline) {
			e.deadline = deadline
		}
		return
	}
	e := &entry{deadline: deadline, run: run}
	e.timer = time.AfterFunc(max(e.next().Sub(m.cfg.Now()), 0), func() { m.fire(t, k, e) })
	m.deadlines[k] = e
}

// fire runs when a deadline's timer goes off.
func (m *Deadlines) fire(t *Term, k key, e *entry) {
	m.mu.Lock()
	if m.fence.Current() != t || m.deadlines[k] != e || e.expiring {
		m.mu.Unlock()
		return // revoked, released or replaced meanwhile
	}
	now := m.cfg.Now()
	timedOut := !e.run.IsZero() && !now.Before(e.run)
	if left := e.next().Sub(now); left > 0 {
		e.timer = time.AfterFunc(left, func() { m.fire(t, k, e) })
		m.mu.Unlock()
		return
	}
	m.endLocked(t, k, e, timedOut)
	m.mu.Unlock()
}

// endLocked marks a deadline as ending and proposes the attempt's expiry or,
// past its run deadline, its timeout. m.mu is held and t is the current term.
func (m *Deadlines) endLocked(t *Term, k key, e *entry, timedOut bool) {
	e.expiring, e.timedOut = true, timedOut
	e.timer.Stop()
	t.Go(func() {
		m.expire(t, k, timedOut)
		m.mu.Lock()
		if m.deadlines[k] == e {
			delete(m.deadlines, k)
		}
		m.mu.Unlock()
	})
}

// expire proposes ExpireAttempt (TimeoutAttempt when timedOut) until it is
// committed or refused, the attempt ended by itself, or the term ends.
// Transient failures are retried with a backoff capped at the heartbeat
// interval.
func (m *Deadlines) expire(t *Term, k key, timedOut bool) {
	log := m.log.With(zap.String("step", k.step), zap.Uint32("attempt", k.attempt), zap.Uint64("epoch", t.Epoch))
	backoff := 20 * time.Millisecond
	for try := 1; ; try++ {
		if !m.stillRunning(k) {
			log.Debug("attempt ended before its deadline passed")
			return
		}
		cmd := &fsmpb.Command{NowMs: m.cfg.Now().UnixMilli(), Body: &fsmpb.Command_ExpireAttempt{ExpireAttempt: &fsmpb.ExpireAttempt{
			StepId: k.step, Attempt: k.attempt, Epoch: t.Epoch,
		}}}
		if timedOut {
			cmd.Body = &fsmpb.Command_TimeoutAttempt{TimeoutAttempt: &fsmpb.TimeoutAttempt{StepId: k.step, Attempt: k.attempt, Epoch: t.Epoch}}
		}
		res, err := m.p.Propose(t.Context(), cmd)
		switch {
		case err == nil && res.Err == nil && timedOut:
			log.Info("attempt timed out: it ran past its run deadline")
			return
		case err == nil && res.Err == nil:
			log.Info("attempt expired: no heartbeat within the timeout", zap.Duration("timeout", m.cfg.HeartbeatTimeout))
			return
		case err == nil:
			log.Debug("attempt expiry refused", zap.String("reason", res.Err.Error()), zap.Bool("timed_out", timedOut))
			return
		}
		if t.Context().Err() != nil {
			return
		}
		log.Warn("proposing the attempt's expiry failed; retrying", zap.Int("try", try), zap.Error(err))
		select {
		case <-t.Context().Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, m.cfg.HeartbeatInterval)
	}
}

func (m *Deadlines) stillRunning(k key) bool {
	st := m.src.State().Step(k.step)
	if st == nil || int(k.attempt) != len(st.Attempts) {
		return false
	}
	return st.Attempts[k.attempt-1].Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING
}
