// Package bulk is the leader service that carries bulk jobs out
// (docs/bulk.md): for each running job of its partition it reads the next
// page of matching sessions from the list index after the job's cursor and
// proposes a BulkJobStep for it, until the job is done or cancelled. It
// keeps no state of its own: a new leader goes on from each job's stored
// cursor, and a step proposed twice across a takeover applies once (the
// state machine applies a step only at the cursor it was read from).
package bulk

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

// Proposer proposes a command and returns its result once applied here.
type Proposer interface {
	Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error)
}

// StateSource gives the replicated state as this node applied it.
type StateSource interface {
	State() *fsm.State
}

// Config is how the service runs.
type Config struct {
	// Interval is how often it looks for running jobs (default 200ms).
	Interval time.Duration
	// Retention is the retention a close gives a session of agent, when the
	// session has none of its own (nil: kept for ever).
	Retention func(agent string) time.Duration
	// Pace is how long it waits between two steps of a job (0: none), to
	// bound the load a job puts on the cluster.
	Pace time.Duration
	Now  func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 200 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Jobs is the leader service that runs the bulk jobs.
type Jobs struct {
	p     Proposer
	src   StateSource
	cfg   Config
	log   *zap.Logger
	fence lease.Fence
}

// New returns a stopped service.
func New(p Proposer, src StateSource, cfg Config, log *zap.Logger) *Jobs {
	if log == nil {
		log = zap.NewNop()
	}
	return &Jobs{p: p, src: src, cfg: cfg.withDefaults(), log: log.Named("bulk")}
}

// EstablishLeadership starts running the jobs in epoch.
func (j *Jobs) EstablishLeadership(_ context.Context, epoch uint64) error {
	t := j.fence.Open(epoch)
	t.Go(func() { j.loop(t.Context(), epoch) })
	return nil
}

// RevokeLeadership stops; nothing of it proposes after it returns.
func (j *Jobs) RevokeLeadership() { j.fence.Close(nil) }

// errFenced: the state machine refused a step for its epoch.
var errFenced = errors.New("bulk step refused")

func (j *Jobs) loop(ctx context.Context, epoch uint64) {
	tick := time.NewTicker(j.cfg.Interval)
	defer tick.Stop()
	for {
		for _, id := range j.src.State().RunningBulkJobs() {
			err := j.run(ctx, epoch, id)
			if errors.Is(err, errFenced) {
				j.log.Warn("the bulk jobs stop for this epoch", zap.Uint64("epoch", epoch), zap.Error(err))
				<-ctx.Done()
				return
			}
			if err != nil && ctx.Err() == nil {
				j.log.Warn("a bulk job step failed; retrying at the next tick", zap.String("job", id), zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// run proposes the steps of job id until it ends. A step refused because
// the job moved on (it was applied before, or the job was cancelled) is
// read again from the state; a stale epoch stops the service.
func (j *Jobs) run(ctx context.Context, epoch uint64, id string) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		st := j.src.State()
		step := st.NextBulkStep(id, epoch)
		if step == nil {
			return nil
		}
		if job := st.BulkJob(id); job.Action == fsmpb.BulkAction_BULK_ACTION_CLOSE {
			step.RetentionMs = make([]int64, len(step.SessionIds))
			for i, sid := range step.SessionIds {
				if s := st.Session(sid); s != nil && j.cfg.Retention != nil {
					step.RetentionMs[i] = j.cfg.Retention(s.Agent).Milliseconds()
				}
			}
		}
		res, err := j.p.Propose(ctx, &fsmpb.Command{NowMs: j.cfg.Now().UnixMilli(), Body: &fsmpb.Command_BulkJobStep{BulkJobStep: step}})
		if err != nil {
			return err
		}
		if res.Err == nil {
			if step.Last {
				j.log.Info("bulk job done", zap.String("job", id))
				return nil
			}
			if err := pause(ctx, j.cfg.Pace); err != nil {
				return err
			}
			continue
		}
		now := j.src.State().BulkJob(id)
		cur := now.GetCursor()
		switch {
		case now.GetStatus() != fsmpb.BulkJobStatus_BULK_JOB_STATUS_RUNNING:
			return nil // cancelled meanwhile
		case cur.GetAtMs() != step.FromCursor.GetAtMs() || cur.GetId() != step.FromCursor.GetId():
			// Applied before (a step proposed again): read on from the cursor.
		case res.Err.Code == fsm.CodeFailedPrecondition:
			return fmt.Errorf("%w: %v", errFenced, res.Err)
		default:
			return fmt.Errorf("bulk job %s: step refused: %v", id, res.Err)
		}
	}
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
