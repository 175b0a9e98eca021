package gc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

func closeSession(c *leasetest.Cluster, id string, retention time.Duration) {
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{SessionId: id, RetentionMs: retention.Milliseconds()}}})
}

// closedSessions creates n sessions named prefix0… and closes them.
func closedSessions(c *leasetest.Cluster, prefix string, n int, retention time.Duration) {
	for i := range n {
		id := fmt.Sprintf("%s%03d", prefix, i)
		c.CreateSession(id, "")
		closeSession(c, id, retention)
	}
}

// leaderDies forwards the first n proposals of a kind, then fails every
// proposal, as a leader that lost its leadership mid-way.
type leaderDies struct {
	p    *leasetest.Cluster
	kind string
	n    int
}

func (d *leaderDies) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	if leasetest.Kind(cmd) == d.kind {
		if d.n == 0 {
			return nil, errors.New("leadership lost")
		}
		d.n--
	}
	return d.p.Propose(ctx, cmd)
}

func TestClosedRetention_DeletesDueSessionsInBoundedBatchesAndNothingBefore(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	closedSessions(c, "due", 250, time.Minute)
	closedSessions(c, "later", 3, time.Hour)
	closedSessions(c, "kept", 2, 0)
	c.CreateSession("open", "")
	g := NewSessions(c, c, SessionConfig{Now: clk.Now}, nil)

	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if n := c.Count("ExpireClosedSessions"); n != 0 {
		t.Fatalf("%d ExpireClosedSessions proposed before any retention passed", n)
	}
	clk.now = clk.now.Add(2 * time.Minute)
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	expiries := c.Proposals("ExpireClosedSessions")
	if len(expiries) != 3 {
		t.Fatalf("%d ExpireClosedSessions for 250 due sessions; want 3 of at most %d", len(expiries), fsm.MaxExpireSessions)
	}
	for _, p := range expiries {
		if n := len(p.GetExpireClosedSessions().SessionIds); n > fsm.MaxExpireSessions || p.GetExpireClosedSessions().Epoch != epoch {
			t.Fatalf("an expiry of %d sessions in epoch %d", n, p.GetExpireClosedSessions().Epoch)
		}
	}
	st := c.State()
	var left []string
	for _, s := range st.Sessions() {
		left = append(left, s.Id)
	}
	if fmt.Sprint(left) != "[kept000 kept001 later000 later001 later002 open]" {
		t.Fatalf("sessions left: %v", left)
	}
	if got := st.DeletedSessions(10); len(got) != 0 {
		t.Fatalf("deleted sessions not purged: %v", got)
	}
}

func TestClosedRetention_AStaleCollectorIsFencedAndANewLeaderFinishesTheWork(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	old := c.BumpEpoch()
	closedSessions(c, "s", 250, time.Minute)
	clk.now = clk.now.Add(time.Hour)

	// The leader deletes one batch, then loses its leadership mid-way.
	dying := NewSessions(&leaderDies{p: c, kind: "ExpireClosedSessions", n: 1}, c, SessionConfig{Now: clk.Now}, nil)
	if err := dying.collect(context.Background(), old); err == nil {
		t.Fatal("the collector of a lost leadership reported no error")
	}
	if got := len(c.State().ClosedDue(clk.now.UnixMilli(), 1000)); got != 150 {
		t.Fatalf("%d due sessions left after one batch; want 150", got)
	}

	// A new leader opens a newer epoch: the old collector is refused and
	// changes nothing; the new one finds the rest in the state.
	epoch := c.BumpEpoch()
	stale := NewSessions(c, c, SessionConfig{Now: clk.Now}, nil)
	if err := stale.collect(context.Background(), old); !errors.Is(err, errSessionsFenced) {
		t.Fatalf("a stale collector: %v; want it fenced off", err)
	}
	if got := len(c.State().ClosedDue(clk.now.UnixMilli(), 1000)); got != 150 {
		t.Fatalf("%d due sessions left after a stale expiry; want 150", got)
	}
	g := NewSessions(c, c, SessionConfig{Now: clk.Now}, nil)
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if n := len(c.State().Sessions()); n != 0 {
		t.Fatalf("%d sessions left after the new leader's collection", n)
	}
}
