package dispatch

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
)

// Timers is the timer wheel of the leader: it proposes FireTimer for every
// AwaitTimer Step that came due and ResumeErrored for every errored session
// whose error-resume backoff came due, as the broker's delay heap reports
// them, then sleeps until the broker reports more. A timer that came due while there was no
// leader fires as soon as the next leader starts the wheel; the state machine
// refuses a second fire, so it fires exactly once.
type Timers struct {
	p      Proposer
	src    StateSource
	queues *Queues
	cfg    Config
	log    *zap.Logger

	fence lease.Fence // the term: its wheel
}

// timerRun is the wheel's term with the broker it reads.
type timerRun struct {
	epoch uint64
	b     *Broker
	ctx   context.Context
}

// NewTimers returns a stopped timer wheel over the broker of queues.
func NewTimers(p Proposer, src StateSource, queues *Queues, cfg Config, log *zap.Logger) *Timers {
	if log == nil {
		log = zap.NewNop()
	}
	return &Timers{p: p, src: src, queues: queues, cfg: cfg.withDefaults(), log: log.Named("timers")}
}

// EstablishLeadership runs the wheel under an epoch on the term's broker
// (stopping an earlier term first).
func (t *Timers) EstablishLeadership(_ context.Context, epoch uint64) error {
	b := t.queues.current()
	if b == nil {
		return errors.New("timers: the ready queues are not loaded")
	}
	term := t.fence.Open(epoch)
	r := &timerRun{epoch: epoch, b: b, ctx: term.Context()}
	term.Go(func() { t.loop(r) })
	return nil
}

// RevokeLeadership ends the wheel; no proposal of it is in flight when it
// returns.
func (t *Timers) RevokeLeadership() { t.fence.Close(nil) }

// due is one proposal the wheel owes: a timer or an error resume, keyed by
// what it is and when it came due, so a refused one is not proposed again.
type due struct {
	kind string
	id   string
	at   int64
}

func (t *Timers) loop(r *timerRun) {
	log := t.log.With(zap.Uint64("epoch", r.epoch))
	log.Info("timer wheel started")
	refused := map[due]bool{}
	failures := 0
	for {
		st := t.src.State()
		if st.Meta().Epoch != r.epoch {
			log.Warn("timer wheel idles: a newer epoch was opened", zap.Uint64("current_epoch", st.Meta().Epoch))
			<-r.ctx.Done()
			return
		}
		owed := r.b.Owed()
		stillOwed := make(map[due]bool, len(owed))
		failed := false
		for _, o := range owed {
			stillOwed[o] = true
			if refused[o] || failed {
				continue
			}
			ok, err := t.propose(r, o, log)
			if err != nil {
				if r.ctx.Err() != nil {
					return
				}
				failed = true
				continue
			}
			if !ok {
				refused[o] = true
			}
		}
		for o := range refused {
			if !stillOwed[o] {
				delete(refused, o)
			}
		}

		var retry time.Duration // 0: until the broker reports more
		if failed {
			failures++
			retry = min(20*time.Millisecond<<min(failures, 7), 2*time.Second)
		} else {
			failures = 0
		}
		if !waitOwed(r, retry) {
			log.Info("timer wheel stopped")
			return
		}
	}
}

// waitOwed waits until the broker reports that something came due, or for
// retry (when > 0: a failed proposal is retried after it). It returns false
// when the run ended.
func waitOwed(r *timerRun, retry time.Duration) bool {
	var wake <-chan time.Time
	if retry > 0 {
		tm := time.NewTimer(retry)
		defer tm.Stop()
		wake = tm.C
	}
	select {
	case <-r.ctx.Done():
		return false
	case <-r.b.owedCh:
	case <-wake:
	}
	return true
}

// propose proposes one owed command; ok is false when the state machine
// refused it.
func (t *Timers) propose(r *timerRun, o due, log *zap.Logger) (ok bool, err error) {
	cmd := &fsmpb.Command{NowMs: t.cfg.Now().UnixMilli()}
	switch o.kind {
	case dueTimer:
		cmd.Body = &fsmpb.Command_FireTimer{FireTimer: &fsmpb.FireTimer{StepId: o.id, Epoch: r.epoch}}
	case dueSchedule, dueQueued:
		fire := t.scheduleFire(o, cmd.NowMs, r.epoch, log)
		if fire == nil {
			return false, nil
		}
		cmd.Body = &fsmpb.Command_FireScheduleSlot{FireScheduleSlot: fire}
		failpointHook(FailpointBeforeScheduleFire)
	default:
		cmd.Body = &fsmpb.Command_ResumeErrored{ResumeErrored: &fsmpb.ResumeErrored{SessionId: o.id, Epoch: r.epoch}}
	}
	log = log.With(zap.String("what", o.kind), zap.String("id", o.id), zap.Int64("due_at_ms", o.at))
	res, err := t.p.Propose(r.ctx, cmd)
	if err != nil {
		if r.ctx.Err() == nil {
			log.Warn("proposing a due timer failed; retrying", zap.Error(err))
		}
		return false, err
	}
	if res.Err != nil {
		log.Debug("due timer refused", zap.String("reason", res.Err.Error()))
		return false, nil
	}
	log.Info("due timer proposed", zap.Int64("late_ms", cmd.NowMs-o.at))
	switch o.kind {
	case dueTimer:
		failpointHook(FailpointAfterWaitResolved)
	case dueSchedule, dueQueued:
		failpointHook(FailpointAfterScheduleFire)
	}
	return true, nil
}
