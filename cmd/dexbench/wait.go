package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// maxIndex bounds a prefix's session count: ids are zero-padded to six
// digits so that they sort in creation order.
const maxIndex = 999999

// idRange names the sessions prefix-from … prefix-(from+n-1).
type idRange struct {
	prefix string
	from   int
	n      int
}

func (r idRange) id(i int) string { return sessionID(r.prefix, r.from+i) }
func (r idRange) last() string    { return r.id(r.n - 1) }

// pageToken is the id just before the range: ListSessions pages after the
// token, exclusive, and "prefix-" sorts before "prefix-000000".
func (r idRange) pageToken() string {
	if r.from == 0 {
		return r.prefix + "-"
	}
	return sessionID(r.prefix, r.from-1)
}

// countDone reads only the sessions of r, page by page from the range's
// start, and stops at the first id past it: with many other sessions in the
// state (idle ones, say) the poll costs the leader the range, not the whole
// table.
func countDone(ctx context.Context, svc dexv1.SessionServiceClient, r idRange) (int, error) {
	req := &dexv1.ListSessionsRequest{PageToken: r.pageToken(), PageSize: uint32(min(r.n, 10000))}
	last, done := r.last(), 0
	for {
		resp, err := svc.ListSessions(ctx, req, grpc.WaitForReady(true))
		if err != nil {
			return 0, err
		}
		for _, s := range resp.Sessions {
			if !strings.HasPrefix(s.Id, r.prefix+"-") || s.Id > last {
				return done, nil
			}
			if sessionDone(s) {
				done++
			}
			if s.Id == last {
				return done, nil
			}
		}
		if resp.NextPageToken == "" {
			return done, nil
		}
		req = &dexv1.ListSessionsRequest{PageToken: resp.NextPageToken, PageSize: req.PageSize}
	}
}

// sessionDone: the session finished its turn (idle after at least one turn)
// or stopped (errored, paused).
func sessionDone(s *dexv1.SessionSummary) bool {
	switch {
	case s.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE && s.TurnsCompleted > 0,
		s.Status == dexv1.SessionStatus_SESSION_STATUS_ERRORED,
		s.Status == dexv1.SessionStatus_SESSION_STATUS_PAUSED:
		return true
	}
	return false
}

// waitDone waits until every session of r is done and returns the moment
// the last one was. The Workers report each finished turn (fin); a
// ListSessions pass once a second catches the sessions that stop otherwise
// (errored, paused) or whose final Complete the Workers did not see return.
func waitDone(ctx context.Context, svc dexv1.SessionServiceClient, fin *finishes, r idRange) (time.Time, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if n, last := fin.done(r); n >= r.n {
			return last, nil
		}
		select {
		case <-ctx.Done():
			n, _ := fin.done(r)
			return time.Now(), fmt.Errorf("sessions %s…%s not done (%d of %d): %w", r.id(0), r.last(), n, r.n, ctx.Err())
		case <-fin.wake:
		case <-tick.C:
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			done, err := countDone(lctx, svc, r)
			cancel()
			if err == nil && done >= r.n {
				return time.Now(), nil
			}
		}
	}
}
