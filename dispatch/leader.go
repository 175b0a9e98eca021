package dispatch

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	dexv1 "github.com/dexhq/dex/api/dexv1"
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
}

// NewLeader ties the attempt leases, the dispatcher and the timer wheel.
func NewLeader(p Proposer, leases *lease.Manager, d *Dispatcher, timers *Timers, log *zap.Logger) *Leader {
	if log == nil {
		log = zap.NewNop()
	}
	return &Leader{p: p, leases: leases, d: d, timers: timers, log: log.Named("leader")}
}

// EstablishLeadership re-arms the lease of every running attempt with a grace
// period, runs the session_restarted recovery (RestartSessions), then starts
// dispatch and the timer wheel. On an error nothing stays started; the
// cluster retries.
func (l *Leader) EstablishLeadership(ctx context.Context, epoch uint64) error {
	l.leases.Establish(ctx, epoch)
	res, err := l.p.Propose(ctx, &dexv1.Command{NowMs: l.d.cfg.Now().UnixMilli(), Body: &dexv1.Command_RestartSessions{RestartSessions: &dexv1.RestartSessions{Epoch: epoch}}})
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		l.leases.Revoke()
		return fmt.Errorf("restart sessions in epoch %d: %w", epoch, err)
	}
	l.d.Start(epoch)
	l.timers.Start(epoch)
	l.log.Info("dispatch lease established", zap.Uint64("epoch", epoch))
	return nil
}

// RevokeLeadership stops dispatch at once (open polls get ErrNotLeader), the
// timer wheel and the attempt leases. Nothing of them proposes after it
// returns.
func (l *Leader) RevokeLeadership() {
	l.d.Stop()
	l.timers.Stop()
	l.leases.Revoke()
	l.log.Info("dispatch lease revoked")
}

// Drain is the first half of a planned step-down: dispatch stops at once
// (open polls get ErrNotLeader, so Workers hear Unavailable and poll again
// elsewhere) and the attempt leases are dropped, so this node fails no
// attempt any more: one still running when the node hands over is re-armed
// by the next leader with its grace period. The timer wheel keeps firing
// until RevokeLeadership. The Worker calls of running attempts are still
// served: a heartbeat is answered from the state and a Complete commits
// while this node leads.
func (l *Leader) Drain() {
	l.d.Stop()
	l.leases.Revoke()
	l.log.Info("draining: dispatch stopped and attempt leases dropped")
}
