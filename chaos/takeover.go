package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The takeover measurement: 3 dexd with their default timing and one
// dexworker; the leader is SIGKILLed again and again while the time until a
// node is ready and until a session created right after the kill is idle is
// measured through one target (dex:/// or HAProxy).

// Takeover targets.
const (
	TargetDex     = "dex"
	TargetHAProxy = "haproxy"
)

// TakeoverOptions configure one measurement.
type TakeoverOptions struct {
	BinDir string // holds dexd and dexworker
	TmpDir string // data dirs and logs go below it (default the system's)
	Target string // TargetDex or TargetHAProxy
	Kills  int
	// Progress gets one line per kill (nil: none).
	Progress io.Writer
	// KeepDir keeps the data dirs and logs (they are always kept on error).
	KeepDir bool
	// Partitions runs the cluster with --partitions N (0 or 1: one); kill
	// k then SIGKILLs the leader of partition k mod N (takeover_partitions.go).
	Partitions int
}

// Kill is one takeover: the leader's SIGKILL and what followed.
type Kill struct {
	N         int
	Killed    string        // the node that was killed
	Partition int           // the partition it led, whose takeover is timed
	NewLeader string        // the node that answered /readyz 200 first
	Ready     time.Duration // kill → a node's /readyz 200
	Idle      time.Duration // kill → the session created after it is idle
	CatchUp   time.Duration // restart of the killed node → its apply caught up
}

// TakeoverResult is the outcome of one measurement.
type TakeoverResult struct {
	Target string
	Kills  []Kill
	// Model calls read from the Worker's ledger: all of them, the ones a
	// session made of a Step that already had one (a rerun), and the calls
	// an uninterrupted session makes.
	ModelCalls, RepeatedModelCalls, BaselineModelCalls int
	Sessions                                           int
	// Others: with partitions, the turns of the partitions the killed node
	// did not lead, around each kill.
	Others []otherTurns
	// Dir holds the logs when they were kept.
	Dir string
}

const (
	takeoverWait = 60 * time.Second // any one wait of the measurement
	// The session of every turn: the demo model answers with a tool call,
	// then with text (two RunModel Steps and a CallTool).
	takeoverMessage = "demo"
)

// RunTakeover starts a cluster, a Worker and the target, and measures
// o.Kills takeovers. Everything it started is stopped by PID when it
// returns, also on error or when ctx ends.
func RunTakeover(ctx context.Context, o TakeoverOptions) (res *TakeoverResult, err error) {
	if o.Kills < 1 {
		return nil, errors.New("at least one kill")
	}
	if o.Target != TargetDex && o.Target != TargetHAProxy {
		return nil, fmt.Errorf("unknown target %q (dex or haproxy)", o.Target)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	dir, err := os.MkdirTemp(o.TmpDir, "dex-takeover-"+o.Target+"-")
	if err != nil {
		return nil, err
	}
	res = &TakeoverResult{Target: o.Target}
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		if err != nil || o.KeepDir {
			res.Dir = dir
			if err != nil {
				err = fmt.Errorf("%w (logs in %s)", err, dir)
			}
			return
		}
		_ = os.RemoveAll(dir)
	}()

	// Default flags: this measures what users get.
	if o.Partitions > 1 && o.Target != TargetDex {
		return nil, fmt.Errorf("a partitioned cluster is measured through the %s target only", TargetDex)
	}
	cl, err := harness.NewCluster(harness.ClusterOptions{BinDir: o.BinDir, Dir: dir, Partitions: o.Partitions})
	if err != nil {
		return res, err
	}
	stops = append(stops, cl.KillAll)
	if err := cl.Start(); err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, takeoverWait)
	_, err = cl.WaitReady(wctx)
	cancel()
	if err != nil {
		return res, fmt.Errorf("cluster start: %w", err)
	}
	target := cl.Target()
	if o.Target == TargetHAProxy {
		h, err := harness.StartHAProxy(harness.HAProxyOptions{Dir: dir, Nodes: cl.Nodes})
		if err != nil {
			return res, err
		}
		stops = append(stops, func() { _ = h.Stop() })
		target = h.Addr
	}
	ledger := filepath.Join(dir, "ledger.jsonl")
	token, err := cl.WorkerToken(ctx, "w1")
	if err != nil {
		return res, err
	}
	w := harness.NewWorker(harness.WorkerOptions{BinDir: o.BinDir, Dir: dir, Name: "w1", Target: target, Ledger: ledger, Token: token, TLS: cl.TLS()})
	if err := w.Start(); err != nil {
		return res, err
	}
	stops = append(stops, w.Kill)
	conn, err := client.Dial(target, cl.DialOptions()...)
	if err != nil {
		return res, err
	}
	stops = append(stops, func() { conn.Close() })
	t := &takeoverRun{ctx: ctx, cl: cl, c: client.New(conn), w: w}

	var sessions []string
	for i := 1; i <= o.Kills; i++ {
		before := fmt.Sprintf("before-%d", i)
		if _, err := t.sessionIdle(before, time.Now()); err != nil {
			return res, fmt.Errorf("kill %d: %w", i, err)
		}
		var k Kill
		after := fmt.Sprintf("after-%d", i)
		if p := cl.Partitions(); p > 1 {
			var others otherTurns
			k, others, err = t.killPartition(i, (i-1)%p)
			after = partitionSession(after, (i-1)%p, p)
			res.Others = append(res.Others, others)
		} else {
			k, err = t.kill(i)
		}
		sessions = append(sessions, before, after)
		if err != nil {
			return res, fmt.Errorf("kill %d: %w", i, err)
		}
		res.Kills = append(res.Kills, k)
		if len(res.Others) > 0 {
			ot := res.Others[len(res.Others)-1]
			fmt.Fprintf(o.Progress, "%-7s kill %2d/%d: SIGKILL %s (leader of partition %d); %s leads it after %4d ms; its new session idle after %4d ms; other partitions' turns p99 %d ms before, %d ms during (%d turns); %s back %d ms after its restart\n",
				o.Target, i, o.Kills, k.Killed, k.Partition, k.NewLeader, k.Ready.Milliseconds(), k.Idle.Milliseconds(),
				SpreadOf(ot.Before).P99.Milliseconds(), SpreadOf(ot.During).P99.Milliseconds(), len(ot.During), k.Killed, k.CatchUp.Milliseconds())
			continue
		}
		fmt.Fprintf(o.Progress, "%-7s kill %2d/%d: SIGKILL %s; %s /readyz/leader 200 after %4d ms; new session idle after %4d ms; %s caught up %d ms after its restart\n",
			o.Target, i, o.Kills, k.Killed, k.NewLeader, k.Ready.Milliseconds(), k.Idle.Milliseconds(), k.Killed, k.CatchUp.Milliseconds())
	}
	entries, err := harness.ReadLedger(ledger)
	if err != nil {
		return res, err
	}
	res.Sessions = len(sessions)
	res.ModelCalls, res.RepeatedModelCalls, res.BaselineModelCalls, err = repeatedModelCalls(entries, sessions)
	return res, err
}

// repeatedModelCalls counts the ledger's model calls of the sessions, and
// the calls beyond one per Step. The first session ran before any kill: its
// count is what an uninterrupted session makes, and every session must make
// exactly as many.
func repeatedModelCalls(entries []harness.LedgerEntry, sessions []string) (total, repeated, baseline int, err error) {
	var odd []string
	for i, s := range sessions {
		steps := map[string]int{}
		n := harness.Executions(entries, s, func(e harness.LedgerEntry) bool {
			if e.Kind != "model" {
				return false
			}
			steps[e.Step]++
			return true
		})
		if i == 0 {
			baseline = n
		}
		total += n
		repeated += n - len(steps)
		if n != baseline {
			odd = append(odd, fmt.Sprintf("%s made %d", s, n))
		}
	}
	if baseline == 0 {
		return total, repeated, baseline, fmt.Errorf("the ledger has no model call of %s", sessions[0])
	}
	if len(odd) > 0 {
		return total, repeated, baseline, fmt.Errorf("an uninterrupted session makes %d model calls, but %s", baseline, strings.Join(odd, ", "))
	}
	return total, repeated, baseline, nil
}

type takeoverRun struct {
	ctx context.Context
	cl  *harness.Cluster
	c   *client.Client
	w   *harness.Worker
}

// sessionIdle creates a session through the target and waits until it is
// idle with nothing queued; it returns the time from since to then.
func (t *takeoverRun) sessionIdle(id string, since time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(t.ctx, takeoverWait)
	defer cancel()
	if _, err := t.c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: takeoverMessage}); err != nil {
		return 0, fmt.Errorf("create session %s: %w", id, err)
	}
	for {
		r, err := t.c.GetSession(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("session %s: %w", id, err)
		}
		if r.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE && len(r.Session.Inbox) == 0 {
			return time.Since(since), nil
		}
		if !t.w.Running() {
			return 0, fmt.Errorf("the Worker exited: %s", harness.Tail(t.w.Log(), 5))
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("session %s is %s after %s:\n%s", id, fsm.StatusName(fsmpb.SessionStatus(r.Session.Status)), takeoverWait, describe(r.Steps))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// kill SIGKILLs the leader, measures, then restarts the killed node and
// waits until it caught up.
func (t *takeoverRun) kill(i int) (Kill, error) {
	k := Kill{N: i}
	wctx, cancel := context.WithTimeout(t.ctx, takeoverWait)
	leader, err := t.cl.WaitReady(wctx)
	cancel()
	if err != nil {
		return k, err
	}
	k.Killed = leader.ID
	type ready struct {
		n  *harness.Node
		at time.Time
	}
	readyc := make(chan ready, 1)
	rctx, rcancel := context.WithTimeout(t.ctx, takeoverWait)
	defer rcancel()
	t0 := time.Now()
	leader.Kill()
	go func() {
		for rctx.Err() == nil {
			for _, n := range t.cl.Nodes {
				if n != leader && n.Ready() {
					readyc <- ready{n, time.Now()}
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(readyc)
	}()
	if k.Idle, err = t.sessionIdle(fmt.Sprintf("after-%d", i), t0); err != nil {
		return k, err
	}
	r, ok := <-readyc
	if !ok {
		return k, fmt.Errorf("no node but %s answered /readyz 200 within %s", leader.ID, takeoverWait)
	}
	k.NewLeader, k.Ready = r.n.ID, r.at.Sub(t0)

	restarted := time.Now()
	if err := leader.Start(); err != nil {
		return k, fmt.Errorf("restart %s: %w", leader.ID, err)
	}
	if err := t.caughtUp(leader, r.n); err != nil {
		return k, err
	}
	k.CatchUp = time.Since(restarted)
	return k, nil
}

// caughtUp waits until n is a follower whose applied index reached the
// leader's.
func (t *takeoverRun) caughtUp(n, leader *harness.Node) error {
	ctx, cancel := context.WithTimeout(t.ctx, takeoverWait)
	defer cancel()
	state := func(addr string) (*dexv1.NodeStateResponse, error) {
		conn, err := grpc.NewClient(addr, t.cl.ConnOptions()...)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		return dexv1.NewAdminServiceClient(conn).NodeState(cctx, &dexv1.NodeStateRequest{})
	}
	ls, err := state(leader.GRPCAddr)
	if err != nil {
		return fmt.Errorf("the leader %s's state: %w", leader.ID, err)
	}
	last := "no answer"
	for {
		st, err := state(n.GRPCAddr)
		if err == nil {
			last = fmt.Sprintf("%s, applied %d", st.State, st.AppliedIndex)
			if strings.EqualFold(st.State, "follower") && st.AppliedIndex >= ls.AppliedIndex {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not catch up with %s (applied %d) within %s: %s", n.ID, leader.ID, ls.AppliedIndex, takeoverWait, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
