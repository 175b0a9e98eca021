package bulk

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

// diesAfter forwards n steps, then applies the next one but fails to
// answer (the leader died after proposing it), then fails every proposal.
type diesAfter struct {
	c *leasetest.Cluster
	n int
}

func (d *diesAfter) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	switch {
	case d.n > 0:
		d.n--
		return d.c.Propose(ctx, cmd)
	case d.n == 0:
		d.n--
		d.c.Propose(ctx, cmd) //nolint:errcheck // committed, never answered
		return nil, errors.New("leadership lost")
	}
	return nil, errors.New("leadership lost")
}

func labelled(c *leasetest.Cluster, id, msg string, labels ...*fsmpb.Label) {
	cs := &fsmpb.CreateSession{SessionId: id, Labels: labels}
	if msg != "" {
		cs.MessageId, cs.Message = id+"-m", msg
	}
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: cs}})
}

func start(c *leasetest.Cluster, j *fsmpb.BulkJob) {
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_StartBulkJob{StartBulkJob: &fsmpb.StartBulkJob{Job: j}}})
}

// A leader that dies mid-job after a step it never heard of is followed by
// one that goes on from the stored cursor: every session is cancelled
// once, in bounded steps.
func TestJobs_GoOnAfterATakeover(t *testing.T) {
	c := leasetest.New(t)
	team := []*fsmpb.Label{{Key: "team", Value: "a"}}
	for i := range 350 {
		labelled(c, fmt.Sprintf("s%03d", i), "hello", team...)
	}
	labelled(c, "other", "hello", &fsmpb.Label{Key: "team", Value: "b"})
	start(c, &fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: &fsmpb.BulkFilter{Labels: team}})

	epoch := c.BumpEpoch()
	first := New(&diesAfter{c: c, n: 1}, c, Config{}, nil)
	if err := first.run(context.Background(), epoch, "j"); err == nil {
		t.Fatal("the dying leader's run ended without an error")
	}
	if j := c.State().BulkJob("j"); j.Acted != 2*fsm.MaxBulkStep {
		t.Fatalf("after the first leader: %d acted; want %d", j.Acted, 2*fsm.MaxBulkStep)
	}
	// The new leader proposes the step the old one applied: refused, and
	// it reads on.
	epoch = c.BumpEpoch()
	second := New(c, c, Config{Interval: time.Millisecond}, nil)
	if err := second.EstablishLeadership(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	defer second.RevokeLeadership()
	deadline := time.Now().Add(10 * time.Second)
	for c.State().BulkJob("j").Status == fsmpb.BulkJobStatus_BULK_JOB_STATUS_RUNNING {
		if time.Now().After(deadline) {
			t.Fatal("the job does not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	j := c.State().BulkJob("j")
	if j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_DONE || j.Acted != 350 || j.Failed != 0 || len(j.Skipped) != 0 {
		t.Fatalf("job: %v", j)
	}
	for _, cmd := range c.Proposals("BulkJobStep") {
		if n := len(cmd.GetBulkJobStep().SessionIds); n > fsm.MaxBulkStep {
			t.Fatalf("a step of %d sessions", n)
		}
	}
	if s := c.State().Session("other"); s.Turn == nil {
		t.Fatal("a session outside the filter was cancelled")
	}
}

// A close gives each session the retention of its agent.
func TestJobs_CloseGivesTheAgentsRetention(t *testing.T) {
	c := leasetest.New(t)
	labelled(c, "s", "", &fsmpb.Label{Key: "k", Value: "v"})
	start(c, &fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE, Filter: &fsmpb.BulkFilter{Labels: []*fsmpb.Label{{Key: "k", Value: "v"}}}})
	epoch := c.BumpEpoch()
	j := New(c, c, Config{Retention: func(string) time.Duration { return time.Hour }}, nil)
	if err := j.run(context.Background(), epoch, "j"); err != nil {
		t.Fatal(err)
	}
	s := c.State().Session("s")
	if s.Status != fsmpb.SessionStatus_SESSION_STATUS_CLOSED || s.GetRetentionMs() != time.Hour.Milliseconds() {
		t.Fatalf("session: %v, retention %d", s.Status, s.GetRetentionMs())
	}
}

// A stale epoch stops the run with errFenced.
func TestJobs_StaleEpochStops(t *testing.T) {
	c := leasetest.New(t)
	labelled(c, "s", "hi", &fsmpb.Label{Key: "k", Value: "v"})
	start(c, &fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: &fsmpb.BulkFilter{Labels: []*fsmpb.Label{{Key: "k", Value: "v"}}}})
	epoch := c.BumpEpoch()
	c.BumpEpoch()
	if err := New(c, c, Config{}, nil).run(context.Background(), epoch, "j"); !errors.Is(err, errFenced) {
		t.Fatalf("run of a stale epoch: %v; want errFenced", err)
	}
	if c.State().BulkJob("j").Acted != 0 {
		t.Fatal("a stale leader acted")
	}
}
