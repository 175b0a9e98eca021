package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/dispatch"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/leasetest"
)

// firedProposer passes proposals to the cluster and reports each FireTimer
// that committed, so a benchmark can wait for the timer wheel.
type firedProposer struct {
	*leasetest.Cluster
	fired chan string
}

func (p *firedProposer) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	res, err := p.Cluster.Propose(ctx, cmd)
	if err == nil && res.Err == nil && cmd.GetFireTimer() != nil {
		p.fired <- cmd.GetFireTimer().StepId
	}
	return res, err
}

// benchLeader establishes the leader services on a cluster with a model
// Worker "model" and a tool Worker "w1".
func benchLeader(b *testing.B, c *leasetest.Cluster, p dispatch.Proposer) (*dispatch.Dispatcher, *lease.Runtime) {
	c.RegisterWorker("model", true)
	c.RegisterWorker("w1", false, leasetest.Lookup)
	log := zap.NewNop()
	deadlines := lease.NewDeadlines(c, c, lease.DeadlinesConfig{HeartbeatTimeout: time.Hour}, log)
	cfg := dispatch.Config{}
	q := dispatch.NewQueues(p, c, cfg, log)
	d := dispatch.New(p, c, q, deadlines, cfg, log)
	l := lease.NewRuntime(log, deadlines, q, d, dispatch.NewTimers(p, c, q, cfg, log))
	c.OnApplied(l.Applied)
	b.Cleanup(l.RevokeLeadership)
	if err := l.EstablishLeadership(context.Background(), c.BumpEpoch()); err != nil {
		b.Fatal(err)
	}
	return d, l
}

// BenchmarkPoll hands out one RunModel task while n sessions each have one
// queued; each op then ends that turn and sends the session a new message,
// so n Steps stay queued. Its cost must not grow with n.
func BenchmarkPoll(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			c := leasetest.New(b)
			for i := range n {
				c.CreateSession(fmt.Sprintf("s%d", i), "hello")
			}
			d, _ := benchLeader(b, c, c)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tasks, err := d.Poll(context.Background(), "model", 1, 0)
				if err != nil || len(tasks) != 1 {
					b.Fatalf("poll: %d tasks, %v", len(tasks), err)
				}
				t := tasks[0]
				c.Complete(fsmpb.AttemptRefFromAPI(t.Ref), "done")
				c.Send(t.SessionId, fmt.Sprintf("m%d", i), "again")
			}
		})
	}
}

// BenchmarkTimer fires one due AwaitTimer while n other sessions sit idle:
// each op makes a session whose model calls sleep(0) and waits until the
// timer wheel's FireTimer committed. Its cost must not grow with n.
func BenchmarkTimer(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("idle=%d", n), func(b *testing.B) {
			c := leasetest.New(b)
			for i := range n {
				c.CreateSession(fmt.Sprintf("idle%d", i), "")
			}
			p := &firedProposer{Cluster: c, fired: make(chan string, 1)}
			benchLeader(b, c, p)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("t%d", i)
				c.CreateSession(id, "go")
				st := c.Queued(id)[0]
				at := c.Start(st.Id, "model")
				c.Complete(leasetest.Ref(st.Id, at), "sleeping", leasetest.Call("c1", "sleep", `{"seconds": 0}`))
				select {
				case <-p.fired:
				case <-time.After(10 * time.Second):
					b.Fatal("the timer did not fire")
				}
			}
		})
	}
}
