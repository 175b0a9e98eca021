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

// Leader starts and stops the leader-only services of Dex in order. It
// implements the cluster's LeaderService: the leadership loop has run a
// barrier and opened the epoch before it calls EstablishLeadership.
type Leader struct {
	p      Proposer
	leases *lease.Manager
	d      *Dispatcher
	timers *Timers
	log    *zap.Logger

	broker atomic.Pointer[Broker] // the term's; nil when not leading
}

// NewLeader ties the attempt leases, the dispatcher and the timer wheel.
// Wire Applied to the state machine's OnApplied: it feeds the broker.
func NewLeader(p Proposer, leases *lease.Manager, d *Dispatcher, timers *Timers, log *zap.Logger) *Leader {
	if log == nil {
		log = zap.NewNop()
	}
	return &Leader{p: p, leases: leases, d: d, timers: timers, log: log.Named("leader")}
}

// Applied feeds one applied entry to the term's broker (nothing when this
// node does not lead). It is the state machine's OnApplied.
func (l *Leader) Applied(a *fsm.Applied) {
	if b := l.broker.Load(); b != nil {
		b.Applied(a)
	}
}

// EstablishLeadership re-arms the lease of every running attempt with a grace
// period, runs the session_restarted recovery (RestartSessions), then builds
// the broker from the state and starts dispatch and the timer wheel on it.
// On an error nothing stays started; the cluster retries.
func (l *Leader) EstablishLeadership(ctx context.Context, epoch uint64) error {
	l.leases.Establish(ctx, epoch)
	res, err := l.p.Propose(ctx, &fsmpb.Command{NowMs: l.d.cfg.Now().UnixMilli(), Body: &fsmpb.Command_RestartSessions{RestartSessions: &fsmpb.RestartSessions{Epoch: epoch}}})
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		l.leases.Revoke()
		return fmt.Errorf("restart sessions in epoch %d: %w", epoch, err)
	}
	b := newBroker(l.d.src, epoch, l.d.cfg.Now, l.log.Named("broker"))
	b.preferOther = l.d.cfg.PreferOtherWait
	if old := l.broker.Swap(b); old != nil {
		l.d.Stop()
		l.timers.Stop()
		old.Stop()
	}
	b.start()
	l.d.Start(epoch, b)
	l.timers.Start(epoch, b)
	l.log.Info("dispatch lease established", zap.Uint64("epoch", epoch))
	return nil
}

// RevokeLeadership stops dispatch at once (open polls get ErrNotLeader), the
// timer wheel, the broker and the attempt leases. Nothing of them proposes
// after it returns.
func (l *Leader) RevokeLeadership() {
	l.d.Stop()
	l.timers.Stop()
	if b := l.broker.Swap(nil); b != nil {
		b.Stop()
	}
	l.leases.Revoke()
	l.log.Info("dispatch lease revoked")
}

// Drain is the first half of a planned step-down: dispatch stops at once
// (open polls get ErrNotLeader, so Workers hear Unavailable and poll again
// elsewhere) and the attempt leases are dropped, so this node fails no
// attempt any more: one still running when the node hands over is re-armed
// by the next leader with its grace period. The timer wheel (and the broker
// it reads) keeps firing until RevokeLeadership. The Worker calls of running
// attempts are still served: a heartbeat is answered from the state and a
// Complete commits while this node leads.
func (l *Leader) Drain() {
	l.d.Stop()
	l.leases.Revoke()
	l.log.Info("draining: dispatch stopped and attempt leases dropped")
}
