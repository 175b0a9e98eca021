// Package gc is the leader's garbage collection through Raft: it proposes
// bounded commands that drop what the retention no longer keeps.
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

// Proposer commits a command through Raft (the leader's proposer).
type Proposer interface {
	Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error)
}

// StateSource gives the replicated state as this node applied it.
type StateSource interface {
	State() *fsm.State
}

// Defaults of the event retention (dexd --event-retention-count and
// --event-retention-age).
const (
	DefaultEventCount = 1000
	DefaultEventAge   = 7 * 24 * time.Hour
)

// EventConfig is the event retention a leader puts in force. Zero means no
// limit.
type EventConfig struct {
	Count uint64
	Age   time.Duration
	// Batch bounds the events one PruneEvents drops (default 256).
	Batch uint32
	// Interval is how often the leader looks for events to prune (default
	// a tenth of Age, between 1s and 1m).
	Interval time.Duration
	Now      func() time.Time
}

func (c EventConfig) withDefaults() EventConfig {
	if c.Batch == 0 || c.Batch > fsm.MaxPruneEvents {
		c.Batch = 256
	}
	if c.Interval <= 0 {
		c.Interval = min(max(c.Age/10, time.Second), time.Minute)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Events is a leader service: on establishing leadership it puts its
// retention in force (SetEventRetention, when the state's differs), then
// prunes old events and sessions over the count until leadership ends.
type Events struct {
	p   Proposer
	src StateSource
	cfg EventConfig
	log *zap.Logger

	fence lease.Fence // the term: its pruning loop
}

// NewEvents returns a stopped event collector.
func NewEvents(p Proposer, src StateSource, cfg EventConfig, log *zap.Logger) *Events {
	if log == nil {
		log = zap.NewNop()
	}
	return &Events{p: p, src: src, cfg: cfg.withDefaults(), log: log.Named("event_gc")}
}

func (e *Events) retention() *fsmpb.EventRetention {
	return &fsmpb.EventRetention{Count: e.cfg.Count, AgeMs: e.cfg.Age.Milliseconds()}
}

// EstablishLeadership puts the retention in force and starts pruning.
func (e *Events) EstablishLeadership(ctx context.Context, epoch uint64) error {
	want := e.retention()
	if got := e.src.State().EventRetention(); got.Count != want.Count || got.AgeMs != want.AgeMs {
		res, err := e.p.Propose(ctx, &fsmpb.Command{NowMs: e.cfg.Now().UnixMilli(), Body: &fsmpb.Command_SetEventRetention{
			SetEventRetention: &fsmpb.SetEventRetention{Epoch: epoch, Retention: want},
		}})
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if err != nil {
			return fmt.Errorf("set event retention in epoch %d: %w", epoch, err)
		}
		e.log.Info("event retention set", zap.Uint64("count", want.Count), zap.Duration("age", e.cfg.Age))
	}
	t := e.fence.Open(epoch)
	t.Go(func() { e.loop(t.Context(), epoch) })
	return nil
}

// RevokeLeadership stops pruning; nothing of it proposes after it returns.
func (e *Events) RevokeLeadership() { e.fence.Close(nil) }

func (e *Events) loop(ctx context.Context, epoch uint64) {
	tick := time.NewTicker(e.cfg.Interval)
	defer tick.Stop()
	// Sessions over the count are looked for until none is: after that every
	// emit keeps its session within the count, so only the age is owed.
	countDone := false
	for {
		err := e.pruneAll(ctx, epoch, &countDone)
		if errors.Is(err, errFenced) {
			e.log.Warn("the event collector stops for this epoch", zap.Uint64("epoch", epoch), zap.Error(err))
			<-ctx.Done()
			return
		}
		if err != nil && ctx.Err() == nil {
			e.log.Warn("proposing an event prune failed; retrying at the next tick", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// owed returns whether events are due for pruning and the sessions over the
// count.
func (e *Events) owed(st *fsm.State, now time.Time, countDone *bool) (bool, []string) {
	var over []string
	if e.cfg.Count > 0 && !*countDone {
		over = st.EventLogsOver(e.cfg.Count, fsm.MaxPruneSessions)
		*countDone = len(over) == 0
	}
	old := false
	if e.cfg.Age > 0 {
		if at, ok := st.OldestKeptEventAt(); ok && at < now.Add(-e.cfg.Age).UnixMilli() {
			old = true
		}
	}
	return old || len(over) > 0, over
}

// errFenced: the state machine refused a prune (a newer epoch was opened).
var errFenced = errors.New("event prune refused")

// pruneAll proposes PruneEvents until nothing is owed.
func (e *Events) pruneAll(ctx context.Context, epoch uint64, countDone *bool) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := e.cfg.Now()
		owed, over := e.owed(e.src.State(), now, countDone)
		if !owed {
			return nil
		}
		res, err := e.p.Propose(ctx, &fsmpb.Command{NowMs: now.UnixMilli(), Body: &fsmpb.Command_PruneEvents{
			PruneEvents: &fsmpb.PruneEvents{Epoch: epoch, MaxEvents: e.cfg.Batch, SessionIds: over},
		}})
		if err != nil {
			return err
		}
		if res.Err != nil {
			return fmt.Errorf("%w: %v", errFenced, res.Err)
		}
	}
}
