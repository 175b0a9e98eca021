package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
)

// SessionConfig is the session collection a leader runs.
type SessionConfig struct {
	// Retention deletes sessions idle (with an empty inbox) for longer than
	// this (dexd --session-retention); zero keeps them for ever.
	Retention time.Duration
	// Batch bounds the rows one PurgeSession removes (default 256).
	Batch uint32
	// Interval is how often the leader looks for deleted sessions to purge
	// and idle ones to expire (default 1s).
	Interval time.Duration
	// Archive, when set, gets every session the retentions delete first:
	// the delete is proposed only for the sessions it wrote.
	Archive Archiver
	Now     func() time.Time
}

func (c SessionConfig) withDefaults() SessionConfig {
	if c.Batch == 0 || c.Batch > fsm.MaxPurgeRows {
		c.Batch = 256
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Sessions is a leader service, Dex's core_sched for sessions: it purges
// deleted sessions through bounded PurgeSession commands, deletes the closed
// sessions whose retention has passed (ExpireClosedSessions) and, with an
// idle retention, the sessions idle for longer (ExpireSessions), until
// leadership ends. It keeps no state of its own: a new leader finds the
// tombstones, the closed sessions due and the idle ones in the replicated
// state. With an archive, a session is deleted by a retention only once the
// archive holds it; a takeover in between writes the same object again.
type Sessions struct {
	p   Proposer
	src StateSource
	cfg SessionConfig
	log *zap.Logger

	fence lease.Fence // the term: its collecting loop

	// Of the collecting goroutine: the writes of the current collection,
	// and what the log said of the archive's failures.
	round      archiveRound
	archiveLog archiveLog
}

// NewSessions returns a stopped session collector.
func NewSessions(p Proposer, src StateSource, cfg SessionConfig, log *zap.Logger) *Sessions {
	if log == nil {
		log = zap.NewNop()
	}
	return &Sessions{p: p, src: src, cfg: cfg.withDefaults(), log: log.Named("session_gc")}
}

// EstablishLeadership starts collecting in epoch.
func (g *Sessions) EstablishLeadership(_ context.Context, epoch uint64) error {
	t := g.fence.Open(epoch)
	t.Go(func() { g.loop(t.Context(), epoch) })
	return nil
}

// RevokeLeadership stops collecting; nothing of it proposes after it returns.
func (g *Sessions) RevokeLeadership() { g.fence.Close(nil) }

func (g *Sessions) loop(ctx context.Context, epoch uint64) {
	tick := time.NewTicker(g.cfg.Interval)
	defer tick.Stop()
	for {
		err := g.collect(ctx, epoch)
		if errors.Is(err, errSessionsFenced) {
			g.log.Warn("the session collector stops for this epoch", zap.Uint64("epoch", epoch), zap.Error(err))
			<-ctx.Done()
			return
		}
		if err != nil && ctx.Err() == nil {
			g.log.Warn("collecting sessions failed; retrying at the next tick", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// errSessionsFenced: the state machine refused a command of the collector
// (a newer epoch was opened).
var errSessionsFenced = errors.New("session collection refused")

// collect expires what the retentions no longer keep (idle sessions, closed
// ones), archived first when an archive is set, then purges every deleted
// session, one bounded command at a time. A failing archive only holds
// back the deletes: the purges go on.
func (g *Sessions) collect(ctx context.Context, epoch uint64) error {
	defer g.reportArchive()
	if err := g.expire(ctx, epoch); err != nil {
		return err
	}
	if err := g.expireClosed(ctx, epoch); err != nil {
		return err
	}
	return g.purge(ctx, epoch)
}

func (g *Sessions) expire(ctx context.Context, epoch uint64) error {
	if g.cfg.Retention <= 0 {
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := g.cfg.Now()
		before := now.Add(-g.cfg.Retention).UnixMilli()
		st := g.src.State()
		ids := st.IdleBefore(before, fsm.MaxExpireSessions)
		if len(ids) == 0 {
			return nil
		}
		full := len(ids) == fsm.MaxExpireSessions
		ids, complete := g.archived(ctx, st, ids)
		if len(ids) == 0 {
			return nil // nothing written: the next tick tries again
		}
		res, err := g.p.Propose(ctx, &fsmpb.Command{NowMs: now.UnixMilli(), Body: &fsmpb.Command_ExpireSessions{
			ExpireSessions: &fsmpb.ExpireSessions{Epoch: epoch, IdleBeforeMs: before, SessionIds: ids},
		}})
		if err != nil {
			return err
		}
		if res.Err != nil {
			return fmt.Errorf("%w: %v", errSessionsFenced, res.Err)
		}
		g.log.Info("idle sessions deleted by the retention", zap.Int("sessions", len(ids)), zap.Duration("retention", g.cfg.Retention))
		if !full || !complete {
			return nil // the next tick finds what became idle meanwhile, and retries what was not written
		}
	}
}

func (g *Sessions) purge(ctx context.Context, epoch uint64) error {
	for {
		ids := g.src.State().DeletedSessions(fsm.MaxExpireSessions)
		if len(ids) == 0 {
			return nil
		}
		for _, id := range ids {
			n := 0
			for g.src.State().IsDeleted(id) {
				if err := ctx.Err(); err != nil {
					return err
				}
				res, err := g.p.Propose(ctx, &fsmpb.Command{NowMs: g.cfg.Now().UnixMilli(), Body: &fsmpb.Command_PurgeSession{
					PurgeSession: &fsmpb.PurgeSession{SessionId: id, MaxRows: g.cfg.Batch, Epoch: epoch},
				}})
				if err != nil {
					return err
				}
				if res.Err != nil && res.Err.Code != fsm.CodeNotFound {
					return fmt.Errorf("%w: %v", errSessionsFenced, res.Err)
				}
				n++
			}
			g.log.Info("deleted session purged", zap.String("session", id), zap.Int("commands", n))
		}
	}
}
