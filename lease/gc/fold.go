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

// DefaultKeepTurnSteps is dexd --keep-turn-steps: the turns whose Steps each
// session keeps before older ones fold.
const DefaultKeepTurnSteps = 20

// Members says which log versions every member of the cluster applies
// (cluster.Node's MembersApply).
type Members interface {
	MembersApply(version uint32) bool
}

// FoldConfig is the turn folding a leader puts in force.
type FoldConfig struct {
	// Keep is the turns whose Steps each session keeps (0: never fold).
	Keep uint64
	// Batch bounds the Steps one FoldTurns folds (default 256).
	Batch uint32
	// Interval is how often the leader looks for sessions owed a fold, and
	// for members that all apply it (default 1s).
	Interval time.Duration
	Now      func() time.Time
}

func (c FoldConfig) withDefaults() FoldConfig {
	if c.Batch == 0 || c.Batch > fsm.MaxFoldSteps {
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

// Folds is a leader service: once every member applies log version 3 it
// puts its keep_turn_steps in force (SetTurnFolding, when the state's
// differs), then folds the Steps of the sessions' older finished turns
// (FoldTurns, bounded) until leadership ends: the sessions the state's
// index lists as owed a fold and, swept once per leadership, those written
// before the setting was turned on or lowered. While a member is older it
// proposes neither: such a member could not apply them.
type Folds struct {
	p       Proposer
	src     StateSource
	members Members
	cfg     FoldConfig
	log     *zap.Logger

	fence lease.Fence // the term: its folding loop

	// Of the folding goroutine: where this leadership's sweep of every
	// session is (swept once it read them all).
	sweepAfter string
	swept      bool
}

// NewFolds returns a stopped folding service.
func NewFolds(p Proposer, src StateSource, members Members, cfg FoldConfig, log *zap.Logger) *Folds {
	if log == nil {
		log = zap.NewNop()
	}
	return &Folds{p: p, src: src, members: members, cfg: cfg.withDefaults(), log: log.Named("turn_fold")}
}

// EstablishLeadership starts folding in epoch.
func (f *Folds) EstablishLeadership(_ context.Context, epoch uint64) error {
	t := f.fence.Open(epoch)
	t.Go(func() { f.loop(t.Context(), epoch) })
	return nil
}

// RevokeLeadership stops folding; nothing of it proposes after it returns.
func (f *Folds) RevokeLeadership() { f.fence.Close(nil) }

// errFoldFenced: the state machine refused a command of the service (a
// newer epoch was opened).
var errFoldFenced = errors.New("turn folding refused")

func (f *Folds) loop(ctx context.Context, epoch uint64) {
	f.sweepAfter, f.swept = "", false // each leadership sweeps once
	tick := time.NewTicker(f.cfg.Interval)
	defer tick.Stop()
	waiting := false
	for {
		err := f.round(ctx, epoch, &waiting)
		if errors.Is(err, errFoldFenced) {
			f.log.Warn("the turn folding stops for this epoch", zap.Uint64("epoch", epoch), zap.Error(err))
			<-ctx.Done()
			return
		}
		if err != nil && ctx.Err() == nil {
			f.log.Warn("folding turns failed; retrying at the next tick", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round folds what is owed when every member applies the folding commands;
// waiting says whether the last round found a member that does not, so the
// log says it once.
func (f *Folds) round(ctx context.Context, epoch uint64, waiting *bool) error {
	if !f.members.MembersApply(fsm.FoldLogVersion) {
		if !*waiting {
			f.log.Info("turn folding waits until every member applies log version 3", zap.Uint64("epoch", epoch))
		}
		*waiting = true
		return nil
	}
	*waiting = false
	return f.foldAll(ctx, epoch)
}

// foldAll puts the setting in force if the state's differs, sweeps the
// sessions for those owed a fold the index does not list (once per
// leadership, a page a round: a session written before the setting was
// lowered or turned on), then proposes FoldTurns until the index lists no
// session. The caller checked that every member applies them.
func (f *Folds) foldAll(ctx context.Context, epoch uint64) error {
	if f.src.State().KeepTurnSteps() != f.cfg.Keep {
		if err := f.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetTurnFolding{SetTurnFolding: &fsmpb.SetTurnFolding{Epoch: epoch, KeepTurnSteps: f.cfg.Keep}}}); err != nil {
			return err
		}
		f.log.Info("turn folding set", zap.Uint64("keep_turn_steps", f.cfg.Keep))
	}
	rounds := 0
	for ; !f.swept && rounds < maxFoldRounds; rounds++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		ids, next := f.src.State().FoldSweep(f.sweepAfter, fsm.MaxFoldSessions)
		if len(ids) > 0 {
			if err := f.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_FoldTurns{FoldTurns: &fsmpb.FoldTurns{Epoch: epoch, SessionIds: ids, MaxSteps: f.cfg.Batch}}}); err != nil {
				return err
			}
		}
		f.sweepAfter, f.swept = next, next == ""
	}
	// Each FoldTurns folds a Step, moves a session past a turn or takes it
	// out of the index, so the rounds end; the bound only keeps one tick
	// short.
	for ; rounds < maxFoldRounds; rounds++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		ids := f.src.State().FoldDue(fsm.MaxFoldSessions)
		if len(ids) == 0 {
			return nil
		}
		if err := f.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_FoldTurns{FoldTurns: &fsmpb.FoldTurns{Epoch: epoch, SessionIds: ids, MaxSteps: f.cfg.Batch}}}); err != nil {
			return err
		}
	}
	return nil
}

// maxFoldRounds bounds the FoldTurns of one tick.
const maxFoldRounds = 1000

func (f *Folds) propose(ctx context.Context, cmd *fsmpb.Command) error {
	cmd.NowMs = f.cfg.Now().UnixMilli()
	res, err := f.p.Propose(ctx, cmd)
	if err != nil {
		return err
	}
	if res.Err != nil {
		return fmt.Errorf("%w: %v", errFoldFenced, res.Err)
	}
	return nil
}
