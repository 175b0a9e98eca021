package dispatch

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
)

// Queues is the leader service that holds the term's broker (the ready
// queues and the delay heap). On establishing leadership it runs the
// session_restarted recovery (RestartSessions), then builds the broker from
// the state; the applied stream feeds it; revoking leadership stops it. The
// Dispatcher and the Timers, started after it, work on its broker.
type Queues struct {
	p   Proposer
	src StateSource
	cfg Config
	log *zap.Logger

	broker atomic.Pointer[Broker] // the term's; nil when not leading
}

// NewQueues returns the broker's service, not leading.
func NewQueues(p Proposer, src StateSource, cfg Config, log *zap.Logger) *Queues {
	if log == nil {
		log = zap.NewNop()
	}
	return &Queues{p: p, src: src, cfg: cfg.withDefaults(), log: log}
}

// Applied feeds one applied entry to the term's broker (nothing when this
// node does not lead): the runtime hands it the applied stream.
func (q *Queues) Applied(a *fsm.Applied) {
	if b := q.broker.Load(); b != nil {
		b.Applied(a)
	}
}

// EstablishLeadership runs the session_restarted recovery, then builds the
// broker from the state and starts it.
func (q *Queues) EstablishLeadership(ctx context.Context, epoch uint64) error {
	q.RevokeLeadership()
	res, err := q.p.Propose(ctx, &fsmpb.Command{NowMs: q.cfg.Now().UnixMilli(), Body: &fsmpb.Command_RestartSessions{RestartSessions: &fsmpb.RestartSessions{Epoch: epoch}}})
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("restart sessions in epoch %d: %w", epoch, err)
	}
	b := newBroker(q.src, epoch, q.cfg.Now, q.log.Named("broker"), q.cfg.Providers)
	b.agentProviders = q.cfg.AgentProviders
	b.preferOther = q.cfg.PreferOtherWait
	q.broker.Store(b) // before start: an entry applied during the load is re-read
	b.start()
	q.log.Info("ready queues loaded", zap.Uint64("epoch", epoch))
	return nil
}

// RevokeLeadership stops the broker: every poll still waiting on it wakes.
func (q *Queues) RevokeLeadership() {
	if b := q.broker.Swap(nil); b != nil {
		b.Stop()
	}
}

// current is the term's broker (nil when not leading).
func (q *Queues) current() *Broker { return q.broker.Load() }

// ReadyQueues are the current term's non-empty ready queues (nil when not
// leading): the Worker liveness fails the Steps of one no live Worker
// serves.
func (q *Queues) ReadyQueues() []lease.ReadyQueue {
	if b := q.broker.Load(); b != nil {
		return b.ReadyQueues()
	}
	return nil
}

// Gauges are the current term's broker counts (ok false when not leading).
func (q *Queues) Gauges() (Gauges, bool) {
	if b := q.broker.Load(); b != nil {
		return b.Gauges()
	}
	return Gauges{}, false
}
