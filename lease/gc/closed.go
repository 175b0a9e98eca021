package gc

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// expireClosed deletes the closed sessions whose retention has passed, one
// ExpireClosedSessions of at most fsm.MaxExpireSessions at a time. The due
// sessions are read from the state's index of closed sessions by deletion
// time, so a new leader picks up where a deposed one stopped. With an
// archive, only the sessions written to it are deleted.
func (g *Sessions) expireClosed(ctx context.Context, epoch uint64) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := g.cfg.Now().UnixMilli()
		st := g.src.State()
		ids := st.ClosedDue(now, fsm.MaxExpireSessions)
		if len(ids) == 0 {
			return nil
		}
		full := len(ids) == fsm.MaxExpireSessions
		ids, complete := g.archived(ctx, st, ids)
		if len(ids) == 0 {
			return nil // nothing written: the next tick tries again
		}
		res, err := g.p.Propose(ctx, &fsmpb.Command{NowMs: now, Body: &fsmpb.Command_ExpireClosedSessions{
			ExpireClosedSessions: &fsmpb.ExpireClosedSessions{Epoch: epoch, SessionIds: ids},
		}})
		if err != nil {
			return err
		}
		if res.Err != nil {
			return fmt.Errorf("%w: %v", errSessionsFenced, res.Err)
		}
		g.log.Info("closed sessions deleted by their retention", zap.Int("sessions", len(ids)))
		if !full || !complete {
			return nil // the next tick finds those that come due meanwhile, and retries what was not written
		}
	}
}
