package soak

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The lifecycle mode (Options.Retention): the clients close sessions
// throughout, so that the number of live sessions stays about constant,
// and the nodes delete closed sessions once the retention passed (and
// archive them first with Options.Archive). When a client sees one of its
// sessions closed it exports it through the API, as `dexctl session
// export` does; the checker compares that export with the archive's
// object and judges its deletion.

const (
	// liveSessionsPerClient: in the lifecycle mode a client creates
	// sessions up to this many and closes them at about the rate it
	// creates them.
	liveSessionsPerClient = 8
	// closedPollEvery: how often a client reads a session it closed until
	// it sees it closed.
	closedPollEvery = time.Second
	exportTimeout   = 30 * time.Second
)

// ClosedSession is what a client saw of a session it closed.
type ClosedSession struct {
	// ClosedAtMs: when the cluster says it closed (0: not seen closed).
	ClosedAtMs int64 `json:"closed_at_ms,omitempty"`
	// SeenAt: since the soak started, when the client saw it closed.
	SeenAt time.Duration `json:"seen_at_ns,omitempty"`
	// Export: the archived form read through the API once it was closed.
	Export []byte `json:"-"`
	// ExportErr: why there is no export.
	ExportErr string `json:"export_err,omitempty"`
}

// closing is a session a client closed and has not yet seen closed.
type closing struct {
	id   string
	next time.Time
}

func (s *soaker) lifecycle() bool { return s.o.Retention > 0 }

func (s *soaker) addClosed(id string, c *ClosedSession) {
	s.smu.Lock()
	if s.closed == nil {
		s.closed = map[string]*ClosedSession{}
	}
	s.closed[id] = c
	s.smu.Unlock()
}

// closeSession closes session id (trying again while the answer is
// unknown) and, once the cluster acknowledged it, follows it until it is
// closed. It reports whether the close was acknowledged.
func (c *loadClient) closeSession(id string) bool {
	for try := 0; try < 3; try++ {
		op := Op{Client: c.id, Kind: OpClose, Session: id}
		c.s.rec.Begin(&op)
		err := c.call(func(ctx context.Context) error {
			_, err := c.s.cl.CloseSession(ctx, id)
			return err
		})
		c.s.rec.End(&op, err)
		switch op.Answer {
		case AnsOK:
			c.closing = append(c.closing, closing{id: id})
			return true
		case AnsRefused:
			return false
		}
	}
	return false
}

// followClosing reads the sessions it closed whose next read is due; one
// it sees closed is exported and leaves the list.
func (c *loadClient) followClosing(ctx context.Context, now time.Time) {
	keep := c.closing[:0]
	for _, cl := range c.closing {
		if now.Before(cl.next) || ctx.Err() != nil {
			keep = append(keep, cl)
			continue
		}
		resp, ok := c.readResp(ctx, cl.id, true)
		switch {
		case ok && resp.GetSession().GetStatus() == dexv1.SessionStatus_SESSION_STATUS_CLOSED:
			c.s.addClosed(cl.id, c.s.exportClosed(ctx, cl.id, resp.GetSession().GetClosedAtMs()))
		case c.lastNotFound:
			// Gone before it was seen closed: the checker judges that.
		default:
			cl.next = now.Add(closedPollEvery)
			keep = append(keep, cl)
		}
	}
	c.closing = keep
}

// exportClosed reads a closed session's archived form through the API.
func (s *soaker) exportClosed(ctx context.Context, id string, closedAtMs int64) *ClosedSession {
	out := &ClosedSession{ClosedAtMs: closedAtMs, SeenAt: time.Since(s.rec.start)}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exportTimeout)
	defer cancel()
	obj, err := archive.FromAPI(ectx, s.cl, id)
	if err != nil {
		out.ExportErr = err.Error()
		if errors.Is(err, archive.ErrNotFound) {
			out.ExportErr = "deleted before it could be exported: " + err.Error()
		}
		return out
	}
	out.Export = obj
	return out
}

// archivedResponse is an export as GetSession would answer it.
func archivedResponse(obj []byte) (*dexv1.GetSessionResponse, error) {
	a, err := format.Decode(obj)
	if err != nil {
		return nil, err
	}
	return &dexv1.GetSessionResponse{Session: a.Session, Steps: a.Steps, LastEventSeq: a.LastEventSeq}, nil
}

// followClosingToTheEnd follows every session the clients closed until it
// is seen closed (or gone), once the turns came to rest.
func (s *soaker) followClosingToTheEnd(ctx context.Context) {
	deadline := time.Now().Add(time.Minute)
	for _, c := range s.clients {
		for len(c.closing) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			for i := range c.closing {
				c.closing[i].next = time.Time{}
			}
			c.followClosing(ctx, time.Now())
			if len(c.closing) > 0 {
				_ = sleepCtx(ctx, closedPollEvery)
			}
		}
		if n := len(c.closing); n > 0 {
			fmt.Fprintf(s.o.Progress, "soak: client %d: %d sessions it closed were not seen closed\n", c.id, n)
		}
	}
}

// lifecycleInput gathers the lifecycle checks' input: the sessions seen
// closed, when the final reads ended and, with an archive, the object of
// every session a client closed or saw gone.
func (s *soaker) lifecycleInput(ctx context.Context, in *CheckInput) {
	life := &LifecycleInput{Retention: s.o.Retention, StartUnixMs: s.rec.start.UnixMilli(), Closed: s.closed, FinalAt: s.finalAt}
	if life.Closed == nil {
		life.Closed = map[string]*ClosedSession{}
	}
	in.Life = life
	if s.archiveDir == "" {
		return
	}
	life.Archive, life.ArchiveErr = map[string][]byte{}, map[string]string{}
	store, err := archive.Open(ctx, "file://"+s.archiveDir)
	if err != nil {
		for _, id := range s.sessions {
			life.ArchiveErr[id] = "the archive does not open: " + err.Error()
		}
		return
	}
	defer store.Close()
	for _, id := range s.sessions {
		obj, err := store.Get(ctx, id)
		switch {
		case err == nil:
			life.Archive[id] = obj
		case !errors.Is(err, archive.ErrNotFound):
			life.ArchiveErr[id] = err.Error()
		}
	}
}
