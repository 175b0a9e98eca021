package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/dexhq/dex/dispatch"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

// heldStarts holds each StartAttempt until released, as a raft log holds an
// entry that is appended but not committed yet: once proposed it commits
// whatever becomes of the proposer's context, which only decides whether
// the proposer hears of it.
type heldStarts struct {
	c       *leasetest.Cluster
	entered chan struct{}
	release chan struct{}
}

func (h *heldStarts) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	if cmd.GetStartAttempt() == nil {
		return h.c.Propose(ctx, cmd)
	}
	h.entered <- struct{}{}
	<-h.release
	res, err := h.c.Propose(context.Background(), cmd)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, err
}

// A drain that begins while a poll's StartAttempt is in flight does not
// lose the attempt: the node still leads, the attempt commits, and the poll
// hands its task to the Worker instead of answering "not the leader" and
// leaving an attempt no Worker runs until the drain times out.
func TestDrain_APollWhoseStartAttemptIsInFlightGetsItsTask(t *testing.T) {
	held := &heldStarts{entered: make(chan struct{}, 1), release: make(chan struct{})}
	f := newFixture(t, options{propose: func(c *leasetest.Cluster) dispatch.Proposer { held.c = c; return held }})
	f.c.CreateSession("s1", "hello")
	st := f.c.Queued("s1")[0]

	type polled struct {
		n   int
		err error
	}
	got := make(chan polled, 1)
	go func() {
		tasks, err := f.d.Poll(context.Background(), "model", 1, time.Second)
		got <- polled{len(tasks), err}
	}()
	<-held.entered
	drained := make(chan struct{})
	go func() { f.d.Drain(); close(drained) }()
	// The drain closes the term at once and waits for the poll; the
	// StartAttempt commits meanwhile.
	for f.d.Epoch() != 0 {
		time.Sleep(time.Millisecond)
	}
	close(held.release)

	p := <-got
	<-drained
	if p.err != nil || p.n != 1 {
		t.Fatalf("the poll whose StartAttempt was in flight at the drain: %d tasks, %v; want its task", p.n, p.err)
	}
	if s := f.step(st.Id); s.Status != running || len(s.Attempts) != 1 {
		t.Fatalf("step %s with %d attempts; want the handed-out attempt running", s.Status, len(s.Attempts))
	}
	// After the drain nothing more is handed out.
	if _, err := f.d.Poll(context.Background(), "model", 1, 0); err == nil {
		t.Fatal("a poll after the drain was served")
	}
}
