package dispatch

import (
	"context"
	"sync"
	"time"

	memdb "github.com/hashicorp/go-memdb"
	"go.uber.org/zap"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Timers is the timer wheel of the leader: it proposes FireTimer for every
// AwaitTimer Step that came due and ResumeErrored for every errored session
// whose error-resume backoff came due, then sleeps until the next due time or
// the next change of the state. A timer that came due while there was no
// leader fires as soon as the next leader starts the wheel; the state machine
// refuses a second fire, so it fires exactly once.
type Timers struct {
	p   Proposer
	src StateSource
	cfg Config
	log *zap.Logger

	mu  sync.Mutex // Start and Stop do not overlap
	cur *timerRun
}

type timerRun struct {
	epoch  uint64
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// NewTimers returns a stopped timer wheel.
func NewTimers(p Proposer, src StateSource, cfg Config, log *zap.Logger) *Timers {
	if log == nil {
		log = zap.NewNop()
	}
	return &Timers{p: p, src: src, cfg: cfg.withDefaults(), log: log.Named("timers")}
}

// Start runs the wheel under an epoch (stopping an earlier run first).
func (t *Timers) Start(epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopLocked()
	ctx, cancel := context.WithCancel(context.Background())
	r := &timerRun{epoch: epoch, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	t.cur = r
	go t.loop(r)
}

// Stop ends the wheel; no proposal of it is in flight when Stop returns.
func (t *Timers) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopLocked()
}

func (t *Timers) stopLocked() {
	if t.cur == nil {
		return
	}
	t.cur.cancel()
	<-t.cur.done
	t.cur = nil
}

// due is one proposal the wheel owes: a timer or an error resume, keyed by
// what it is and when it came due, so a refused one is not proposed again.
type due struct {
	kind string
	id   string
	at   int64
}

func (t *Timers) loop(r *timerRun) {
	defer close(r.done)
	log := t.log.With(zap.Uint64("epoch", r.epoch))
	log.Info("timer wheel started")
	refused := map[due]bool{}
	failures := 0
	for {
		st := t.src.State()
		ws := st.WatchSet()
		if st.Meta().Epoch != r.epoch {
			log.Warn("timer wheel idles: a newer epoch was opened", zap.Uint64("current_epoch", st.Meta().Epoch))
			<-r.ctx.Done()
			return
		}
		now := t.cfg.Now().UnixMilli()
		var next int64
		var owed []due
		for _, s := range st.StepsWithStatus(dexv1.StepStatus_STEP_STATUS_WAITING) {
			if s.Kind != dexv1.StepKind_STEP_KIND_AWAIT_TIMER {
				continue
			}
			if s.DueAtMs <= now {
				owed = append(owed, due{"timer", s.Id, s.DueAtMs})
			} else if next == 0 || s.DueAtMs < next {
				next = s.DueAtMs
			}
		}
		for _, s := range st.Sessions() {
			if s.Status != dexv1.SessionStatus_SESSION_STATUS_ERRORED || s.Turn == nil || s.ResumeAtMs == 0 {
				continue
			}
			if s.ResumeAtMs <= now {
				owed = append(owed, due{"resume", s.Id, s.ResumeAtMs})
			} else if next == 0 || s.ResumeAtMs < next {
				next = s.ResumeAtMs
			}
		}

		stillOwed := map[due]bool{}
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

		var sleep time.Duration // 0: until the state changes
		if failed {
			failures++
			sleep = min(20*time.Millisecond<<min(failures, 7), 2*time.Second)
		} else {
			failures = 0
			if next > 0 {
				sleep = max(time.Duration(next-now)*time.Millisecond, time.Millisecond)
			}
		}
		if !wait(r.ctx, ws, sleep, !failed) {
			log.Info("timer wheel stopped")
			return
		}
	}
}

// wait sleeps for d (forever when 0) or, if onChange, until the state
// changes. It returns false when ctx ended.
func wait(ctx context.Context, ws memdb.WatchSet, d time.Duration, onChange bool) bool {
	var wake <-chan time.Time
	if d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		wake = tm.C
	}
	var changed <-chan struct{}
	if onChange {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		changed = watchCh(wctx, ws)
	}
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-wake:
	}
	return true
}

// propose proposes one owed command; ok is false when the state machine
// refused it.
func (t *Timers) propose(r *timerRun, o due, log *zap.Logger) (ok bool, err error) {
	cmd := &dexv1.Command{NowMs: t.cfg.Now().UnixMilli()}
	if o.kind == "timer" {
		cmd.Body = &dexv1.Command_FireTimer{FireTimer: &dexv1.FireTimer{StepId: o.id, Epoch: r.epoch}}
	} else {
		cmd.Body = &dexv1.Command_ResumeErrored{ResumeErrored: &dexv1.ResumeErrored{SessionId: o.id, Epoch: r.epoch}}
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
	if o.kind == "timer" {
		failpointHook(FailpointAfterWaitResolved)
	}
	return true, nil
}
