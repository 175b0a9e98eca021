package gc

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
)

// Archiver writes sessions to the archive before the collector deletes
// them (dexd --archive-url).
type Archiver interface {
	// Archive writes session id as st holds it, replacing an earlier
	// object of the same session, and returns nil only once the object is
	// durable. Written again from an unchanged session, the object is the
	// same bytes.
	Archive(ctx context.Context, st *fsm.State, id string) error
}

const (
	// archiveTimeout bounds one session's write, so an archive that hangs
	// holds the collector (and the purges behind it) only so long.
	archiveTimeout = time.Minute
	// archiveFailStreak failed writes in a row end a batch: the archive is
	// likely down, and the rest of the batch waits for the next tick
	// instead of failing one by one.
	archiveFailStreak = 3
	// archiveLogEvery is how often a failure that goes on is logged again.
	archiveLogEvery = 10 * time.Minute
)

// archiveRound is what one collection's writes did, over its batches.
type archiveRound struct {
	written, failed, notTried int
	first                     error // the first failed write's error
}

// archiveLog reports the archive's failures: one line when they start,
// one every archiveLogEvery while they go on, one when writes succeed
// again. It is only used from the collecting goroutine.
type archiveLog struct {
	failing bool
	rounds  int // failing rounds since the last line
	writes  int // failed writes since the last line
	last    time.Time
}

// archived writes the sessions of ids to the archive, in order, and returns
// those written: only they may be deleted. complete is false when a
// session was not written (failed or not tried): the caller then leaves the
// rest to the next tick. Without an archive every session is returned.
func (g *Sessions) archived(ctx context.Context, st *fsm.State, ids []string) (written []string, complete bool) {
	if g.cfg.Archive == nil {
		return ids, true
	}
	streak := 0
	for i, id := range ids {
		if ctx.Err() != nil {
			g.round.notTried += len(ids) - i
			break
		}
		wctx, cancel := context.WithTimeout(ctx, archiveTimeout)
		err := g.cfg.Archive.Archive(wctx, st, id)
		cancel()
		if err == nil {
			written = append(written, id)
			g.round.written++
			streak = 0
			continue
		}
		if ctx.Err() != nil { // leadership ended: not the archive's failure
			g.round.notTried += len(ids) - i
			break
		}
		g.round.failed++
		if g.round.first == nil {
			g.round.first = err
		}
		if streak++; streak == archiveFailStreak {
			g.round.notTried += len(ids) - i - 1
			break
		}
	}
	if len(written) > 0 {
		afterArchiveWrite() // a failpoint of the chaos build: written, not yet deleted
	}
	return written, len(written) == len(ids)
}

// reportArchive logs what the last collection's writes did, as archiveLog
// says, and starts a new round.
func (g *Sessions) reportArchive() {
	r := g.round
	g.round = archiveRound{}
	l := &g.archiveLog
	if r.failed == 0 {
		if l.failing && r.written > 0 {
			g.log.Info("the archive takes writes again; the sessions it holds are deleted",
				zap.Int("failed_rounds", l.rounds), zap.Int("failed_writes", l.writes))
			*l = archiveLog{}
		}
		return
	}
	l.rounds++
	l.writes += r.failed
	now := g.cfg.Now()
	if l.failing && now.Sub(l.last) < archiveLogEvery {
		return
	}
	msg := "archive writes fail: the sessions they hold are not deleted; retrying every tick"
	if l.failing {
		msg = "archive writes still fail: the sessions they hold are not deleted; retrying every tick"
	}
	g.log.Error(msg,
		zap.Int("failed", r.failed), zap.Int("written", r.written), zap.Int("not_tried", r.notTried),
		zap.Int("failed_rounds", l.rounds), zap.Int("failed_writes", l.writes), zap.Error(r.first))
	l.failing, l.rounds, l.writes, l.last = true, 0, 0, now
}
