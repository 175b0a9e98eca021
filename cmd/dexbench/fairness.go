package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The --fairness mode measures the leader's dispatch order (priority, then
// fairness key, docs/flow-control.md) on the usual cluster, in two phases,
// each on a backlog queued while no Worker polls:
//
//   - fair share: the sessions of keys "big" and "small", weight 1 each;
//     how soon the small key's Steps go out beside the big key's backlog;
//   - priority: priority 1 sessions, then priority 5 ones created one by
//     one while they drain; how soon each priority 5 Step goes out.
//
// Every session is one turn of one model call answered with text, so a
// session is one queued Step and the backlog drains fast.
const (
	bigKey        = "big"
	smallKey      = "small"
	backlogPrefix = "backlog"
	urgentPrefix  = "urgent"
	// createBatch bounds the CreateSession calls in flight while a backlog
	// is queued.
	createBatch = 500
	// The goals: the small key gets at least half its fair share, and a
	// priority 5 Step is dispatched within 50 ms at p99.
	fairShareGoal = 0.5
	urgentGoalMs  = 50
)

type fairnessOptions struct {
	on      bool
	big     int
	small   int
	backlog int
	urgent  int
}

func (f *fairnessOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "fairness", false, "measure the dispatch order instead of the load run: a small fairness key beside a big one's backlog, then priority 5 sessions beside a priority 1 backlog")
	fs.IntVar(&f.big, "fairness-big", 10000, "--fairness: sessions of the big key, each one queued model Step")
	fs.IntVar(&f.small, "fairness-small", 100, "--fairness: sessions of the small key")
	fs.IntVar(&f.backlog, "fairness-backlog", 2000, "--fairness: priority 1 sessions queued before the Workers start")
	fs.IntVar(&f.urgent, "fairness-urgent", 50, "--fairness: priority 5 sessions created one by one while the priority 1 backlog drains (0: no priority phase)")
}

// check refuses what --fairness cannot run with.
func (f fairnessOptions) check(o options) error {
	if !f.on {
		return nil
	}
	if f.small < 1 || f.big < f.small || f.backlog < 0 || f.urgent < 0 {
		return errors.New("--fairness-small must be at least 1, --fairness-big at least --fairness-small, --fairness-backlog and --fairness-urgent at least 0")
	}
	if f.big > maxIndex || f.backlog > maxIndex || f.urgent > maxIndex {
		return fmt.Errorf("--fairness-big, --fairness-backlog and --fairness-urgent must be at most %d", maxIndex)
	}
	if f.urgent > f.backlog {
		return errors.New("--fairness-backlog must be at least --fairness-urgent: each priority 5 session is created once a share of the backlog went out")
	}
	if o.runs > 1 || o.fairnessKeys > 0 {
		return errors.New("--fairness runs once and sets its sessions' keys itself: drop --runs and --fairness-keys")
	}
	return nil
}

// flowShape is --fairness-keys: session i gets key "key-<i mod k>" of
// weight 1 and, with --priorities, priority 1 + (i ÷ k) mod 5, so every key
// has Steps of every priority. Nil (no flow control) when k is 0.
func flowShape(k int, priorities bool) sessionShape {
	if k <= 0 {
		return nil
	}
	return func(i int, req *dexv1.CreateSessionRequest) {
		req.FairnessKey, req.FairnessWeight = fmt.Sprintf("key-%d", i%k), 1
		if priorities {
			req.Priority = uint32(1 + (i/k)%5)
		}
	}
}

func keyShape(key string) sessionShape {
	return func(_ int, req *dexv1.CreateSessionRequest) { req.FairnessKey, req.FairnessWeight = key, 1 }
}

func priorityShape(p uint32) sessionShape {
	return func(_ int, req *dexv1.CreateSessionRequest) { req.Priority = p }
}

// dispatchLog keeps when a Worker first held a task of each session (the
// Hold hook before the claim) and counts those sessions by id prefix, so a
// phase can wait for a share of its backlog to go out.
type dispatchLog struct {
	mu    sync.Mutex
	at    map[string]time.Time
	count map[string]int
	wake  chan struct{}
}

func newDispatchLog() *dispatchLog {
	return &dispatchLog{at: map[string]time.Time{}, count: map[string]int{}, wake: make(chan struct{}, 1)}
}

func (d *dispatchLog) held(sessionID string) {
	now := time.Now()
	d.mu.Lock()
	if _, seen := d.at[sessionID]; !seen {
		d.at[sessionID] = now
		prefix, _, _ := strings.Cut(sessionID, "-")
		d.count[prefix]++
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatchLog) get(sessionID string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.at[sessionID]
	return t, ok
}

// since returns, for each session of r a Worker held a task of, the ms from
// t0 to the first one.
func (d *dispatchLog) since(t0 time.Time, r idRange) []float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []float64
	for i := range r.n {
		if t, ok := d.at[r.id(i)]; ok {
			out = append(out, ms(t.Sub(t0)))
		}
	}
	return out
}

// waitFor waits until n sessions of prefix were dispatched.
func (d *dispatchLog) waitFor(ctx context.Context, prefix string, n int) error {
	for {
		d.mu.Lock()
		got := d.count[prefix]
		d.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d %s sessions dispatched: %w", got, n, prefix, ctx.Err())
		case <-d.wake:
		}
	}
}

// fairShare is the fair share phase: two keys of weight 1, the small key's
// Steps queued beside the big key's backlog.
type fairShare struct {
	Keys []*keyDispatch `json:"keys"`
	// Workers' start → the last session done.
	Seconds float64 `json:"drain_seconds"`
	// Workers' start → the first task held (the Workers register first).
	FirstMs float64 `json:"first_dispatch_ms"`
	// Dispatches ÷ the time from the first to the last.
	DispatchPerSec float64 `json:"dispatched_per_sec"`
	// The small key's dispatches among the first 2 × its sessions, and
	// that ÷ its fair share (half of them). Goal ≥ 0.5: within 2× of fair.
	Window        int     `json:"window"`
	SmallInWindow int     `json:"small_in_window"`
	ShareOfFair   float64 `json:"small_share_of_fair"`
	// First dispatch → the small key's last, and what it takes at the
	// measured rate when the keys alternate: window ÷ dispatched_per_sec.
	SmallDoneMs      float64 `json:"small_done_ms"`
	IdealSmallDoneMs float64 `json:"ideal_small_done_ms"`
	GoalMet          bool    `json:"goal_met"`
}

type keyDispatch struct {
	Key      string `json:"key"`
	Weight   int    `json:"weight"`
	Sessions int    `json:"sessions"`
	// Sessions no Worker here held a task of.
	Missing int `json:"not_dispatched"`
	// Workers' start → the session's model task held.
	Dispatch *dist `json:"dispatch_ms"`
}

// newFairShare computes the phase's figures from each key's dispatch times
// (ms from the Workers' start) and session counts.
func newFairShare(big, small []float64, nBig, nSmall int) *fairShare {
	f := &fairShare{Window: 2 * nSmall, Keys: []*keyDispatch{
		{Key: bigKey, Weight: 1, Sessions: nBig, Missing: nBig - len(big), Dispatch: newDist(big)},
		{Key: smallKey, Weight: 1, Sessions: nSmall, Missing: nSmall - len(small), Dispatch: newDist(small)},
	}}
	all := slices.Concat(big, small)
	if len(all) == 0 {
		return f
	}
	first, last := slices.Min(all), slices.Max(all)
	f.FirstMs = round1(first)
	rate := 0.0
	if last > first {
		rate = float64(len(all)-1) / (last - first) * 1000
	}
	f.DispatchPerSec = round1(rate)
	f.SmallInWindow = amongFirst(small, big, f.Window)
	f.ShareOfFair = round2(float64(f.SmallInWindow) / float64(nSmall))
	if len(small) > 0 {
		f.SmallDoneMs = round1(slices.Max(small) - first)
	}
	if rate > 0 {
		f.IdealSmallDoneMs = round1(float64(f.Window) / rate * 1000)
	}
	f.GoalMet = f.ShareOfFair >= fairShareGoal
	return f
}

// amongFirst counts the times of mine among the first n of mine and others
// together; a tie goes to others.
func amongFirst(mine, others []float64, n int) int {
	a, b := slices.Sorted(slices.Values(mine)), slices.Sorted(slices.Values(others))
	i, j := 0, 0
	for i+j < n && (i < len(a) || j < len(b)) {
		if i < len(a) && (j >= len(b) || a[i] < b[j]) {
			i++
		} else {
			j++
		}
	}
	return i
}

// priorityLoad is the priority phase: priority 5 sessions created while a
// priority 1 backlog drains.
type priorityLoad struct {
	Backlog int `json:"backlog_sessions"`
	Urgent  int `json:"urgent_sessions"`
	// Workers' start → the last session done.
	Seconds float64 `json:"drain_seconds"`
	// A priority 5 session's CreateSession call began → a Worker holds its
	// model task. Goal: p99 < 50 ms.
	CreateToHeld *dist `json:"urgent_create_to_held"`
	// Its Step queued (ready_at_ms) → the leader proposed the attempt (the
	// broker picked it), and → a Worker holds it.
	QueuedToStart *dist `json:"urgent_queued_to_start_proposed"`
	QueuedToHeld  *dist `json:"urgent_queued_to_held"`
	// Workers' start → a backlog session's task held.
	BacklogDispatch *dist `json:"backlog_dispatch_ms"`
	// Backlog Steps dispatched after the last priority 5 one (or never):
	// still queued when it went out.
	BacklogLeft   int  `json:"backlog_left_at_last_urgent"`
	UrgentMissing int  `json:"urgent_not_dispatched"`
	GoalMet       bool `json:"goal_met"`
}

// urgentAfter is how many backlog Steps must have gone out before priority
// 5 session j of n is created: the n are spread over the first 80 % of the
// backlog, so a backlog is still queued when the last one is, and the
// first waits for the Workers to be polling.
func urgentAfter(j, n, backlog int) int {
	return max(1, (j+1)*4*backlog/(5*n))
}

// backlogLeft counts the backlog sessions dispatched after t, or never (of
// n), all times in ms from the Workers' start.
func backlogLeft(backlog []float64, n int, t float64) int {
	left := n - len(backlog)
	for _, x := range backlog {
		if x > t {
			left++
		}
	}
	return left
}

type fairnessConfig struct {
	Big         int `json:"big_key_sessions"`
	Small       int `json:"small_key_sessions"`
	Backlog     int `json:"priority1_backlog"`
	Urgent      int `json:"priority5_sessions"`
	Workers     int `json:"workers"`
	Concurrency int `json:"concurrency_per_worker"`
	Nodes       int `json:"nodes"`
	Partitions  int `json:"partitions"`
}

type fairnessReport struct {
	Bench          string         `json:"bench"` // "fairness"
	Machine        machine        `json:"machine"`
	Config         fairnessConfig `json:"config"`
	Leader         string         `json:"leader"`
	Fsync          *dist          `json:"fsync_probe,omitempty"`
	Fair           *fairShare     `json:"fair_share,omitempty"`
	Priority       *priorityLoad  `json:"priority,omitempty"`
	WorkerWarnings int64          `json:"worker_warnings"`
	Error          string         `json:"error,omitempty"`
}

// fairnessOnce runs --fairness on a fresh cluster and prints its report. A
// non-zero code is the exit code dexbench must stop with.
func fairnessOnce(ctx context.Context, o options) int {
	rep, err := runFairness(ctx, o)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "dexbench: interrupted; every dexd it started is stopped")
		return 130
	}
	if rep != nil {
		if o.jsonOut {
			writeJSON(os.Stdout, rep)
		} else {
			rep.writeTable(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexbench:", err)
		return 1
	}
	return 0
}

// fairnessRun is what both phases use: the cluster, a client, and what
// the Workers record.
type fairnessRun struct {
	o       options
	c       *benchCluster
	cl      *client.Client
	svc     dexv1.SessionServiceClient
	rec     *recorder
	fin     *finishes
	log     *dispatchLog
	payload string
	wlog    *zap.Logger
}

func runFairness(ctx context.Context, o options) (rep *fairnessReport, err error) {
	if err := findDexd(o); err != nil {
		return nil, err
	}
	dir, err := benchDir(o)
	if err != nil {
		return nil, err
	}
	defer func() { releaseDir(ctx, o, dir, err) }()

	fo := o.fairness
	rep = &fairnessReport{Bench: "fairness", Machine: thisMachine(), Config: fairnessConfig{Big: fo.big, Small: fo.small, Backlog: fo.backlog,
		Urgent: fo.urgent, Workers: o.workers, Concurrency: o.concurrency, Nodes: 3, Partitions: max(o.partitions, 1)}}
	if o.fsyncProbe > 0 {
		if rep.Fsync, err = probeFsync(dir, o.fsyncProbe); err != nil {
			return rep, fmt.Errorf("fsync probe: %w", err)
		}
	}
	c, err := startCluster(ctx, o, dir)
	if err != nil {
		return rep, err
	}
	defer c.StopAll()
	rep.Leader = c.leader.ID

	warns := &warnCounter{}
	wlog := warns.logger()
	defer func() { _ = wlog.Sync() }()
	defer func() {
		rep.WorkerWarnings = warns.n.Load()
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	cc, err := client.Dial(c.Target(), benchDialOptions(o.token, c.Cluster)...)
	if err != nil {
		return rep, err
	}
	defer cc.Close()
	f := &fairnessRun{o: o, c: c, cl: client.New(cc), svc: dexv1.NewSessionServiceClient(cc), rec: &recorder{m: map[string]*arrival{}},
		fin: newFinishes(), log: newDispatchLog(), payload: filler(int(o.payload)), wlog: wlog}

	if err := f.warmUp(ctx); err != nil {
		return rep, fmt.Errorf("warm-up: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, o.timeout)
	rep.Fair, err = f.fairShare(pctx)
	cancel()
	if err != nil || fo.urgent == 0 {
		return rep, err
	}
	pctx, cancel = context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep.Priority, err = f.priority(pctx)
	return rep, err
}

// startWorkers starts a pool of the bench's Workers whose model answers
// with text alone, and which log each session's first task held.
func (f *fairnessRun) startWorkers(ctx context.Context, name string) (*workerPool, error) {
	opts := benchWorkerOptions(f.o, f.rec, f.fin, 0, f.payload, f.wlog)
	record := opts.Hold
	opts.Hold = func(moment string, t *dexv1.Task) {
		if moment == client.HoldBeforeClaim {
			f.log.held(t.GetSessionId())
		}
		record(moment, t)
	}
	return startWorkers(ctx, f.c, f.o, name, opts)
}

// warmUp drives --warmup sessions with Workers of their own, stopped after:
// every channel connects and the leader has served a turn.
func (f *fairnessRun) warmUp(ctx context.Context) error {
	if f.o.warmup == 0 {
		return nil
	}
	w, err := f.startWorkers(ctx, "warm-w")
	if err != nil {
		return err
	}
	defer w.close()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, _, _, err = drive(wctx, f.cl, f.svc, f.fin, idRange{prefix: "warmup", n: f.o.warmup}, nil)
	return err
}

// waitAll waits until every session of the ranges is done and returns when
// the last one was.
func (f *fairnessRun) waitAll(ctx context.Context, ranges ...idRange) (time.Time, error) {
	var end time.Time
	for _, r := range ranges {
		t, err := waitDone(ctx, f.svc, f.fin, r)
		if err != nil {
			return t, err
		}
		end = maxTime(end, t)
	}
	return end, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// fairShare queues the two keys' sessions, starts the Workers and times
// each session's dispatch from then.
func (f *fairnessRun) fairShare(ctx context.Context) (*fairShare, error) {
	big := idRange{prefix: bigKey, n: f.o.fairness.big}
	small := idRange{prefix: smallKey, n: f.o.fairness.small}
	for _, r := range []idRange{big, small} {
		if _, err := createAll(ctx, f.cl, r, keyShape(r.prefix), createBatch); err != nil {
			return nil, fmt.Errorf("fair share backlog: %w", err)
		}
	}
	t0 := time.Now()
	workers, err := f.startWorkers(ctx, "fair-w")
	if err != nil {
		return nil, err
	}
	defer workers.close()
	end, err := f.waitAll(ctx, big, small)
	fs := newFairShare(f.log.since(t0, big), f.log.since(t0, small), big.n, small.n)
	fs.Seconds = round2(end.Sub(t0).Seconds())
	return fs, err
}

// priority queues the priority 1 backlog, starts the Workers and creates the
// priority 5 sessions as the backlog drains.
func (f *fairnessRun) priority(ctx context.Context) (*priorityLoad, error) {
	backlog := idRange{prefix: backlogPrefix, n: f.o.fairness.backlog}
	urgent := idRange{prefix: urgentPrefix, n: f.o.fairness.urgent}
	if _, err := createAll(ctx, f.cl, backlog, priorityShape(1), createBatch); err != nil {
		return nil, fmt.Errorf("priority backlog: %w", err)
	}
	t0 := time.Now()
	workers, err := f.startWorkers(ctx, "prio-w")
	if err != nil {
		return nil, err
	}
	defer workers.close()
	created, err := f.createUrgent(ctx, urgent, backlog.n)
	if err != nil {
		return nil, err
	}
	end, err := f.waitAll(ctx, backlog, urgent)
	if err != nil {
		return nil, err
	}
	p := &priorityLoad{Backlog: backlog.n, Urgent: urgent.n, Seconds: round2(end.Sub(t0).Seconds())}
	var createToHeld []float64
	lastUrgent := 0.0
	for j, t := range created {
		at, ok := f.log.get(urgent.id(j))
		if !ok {
			p.UrgentMissing++
			continue
		}
		createToHeld = append(createToHeld, ms(at.Sub(t)))
		lastUrgent = max(lastUrgent, ms(at.Sub(t0)))
	}
	backlogMs := f.log.since(t0, backlog)
	p.CreateToHeld, p.BacklogDispatch = newDist(createToHeld), newDist(backlogMs)
	p.BacklogLeft = backlogLeft(backlogMs, backlog.n, lastUrgent)
	p.GoalMet = p.UrgentMissing == 0 && p.CreateToHeld.P99 < urgentGoalMs
	sessions, err := collect(ctx, f.cl, urgentPrefix, urgent.n)
	p.QueuedToStart, p.QueuedToHeld = f.queuedTimes(sessions)
	return p, err
}

// createUrgent creates the priority 5 sessions, session j once
// urgentAfter(j) backlog Steps went out, each call in its own goroutine so
// a slow one does not hold back the next. created[j] is when j's call began.
func (f *fairnessRun) createUrgent(ctx context.Context, urgent idRange, backlog int) ([]time.Time, error) {
	created := make([]time.Time, urgent.n)
	errs := make([]error, urgent.n)
	var (
		wg      sync.WaitGroup
		waitErr error
	)
	for j := range urgent.n {
		if waitErr = f.log.waitFor(ctx, backlogPrefix, urgentAfter(j, urgent.n, backlog)); waitErr != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			created[j] = time.Now()
			req := &dexv1.CreateSessionRequest{SessionId: urgent.id(j), Message: "go", Priority: 5}
			if _, err := f.cl.CreateSession(ctx, req); err != nil {
				errs[j] = fmt.Errorf("create session %s: %w", req.SessionId, err)
			}
		}()
	}
	wg.Wait()
	return created, errors.Join(append(errs, waitErr)...)
}

// queuedTimes reads, for each session's first Step, queued → the attempt
// proposed and queued → the task held here (both clocks are this machine's).
func (f *fairnessRun) queuedTimes(sessions []*dexv1.GetSessionResponse) (toStart, toHeld *dist) {
	var start, held []float64
	for _, gs := range sessions {
		if len(gs.Steps) == 0 || len(gs.Steps[0].Attempts) == 0 {
			continue
		}
		st := gs.Steps[0]
		queued := float64(st.ReadyAtMs)
		start = append(start, float64(st.Attempts[0].StartedAtMs)-queued)
		if at, ok := f.log.get(gs.GetSession().GetId()); ok {
			held = append(held, unixMs(at)-queued)
		}
	}
	return newDist(start), newDist(held)
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func (r *fairnessReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "dexbench --fairness: %d dexd nodes (fsync on), %d partition(s), %d Workers x %d, one model call a session, leader %s\n",
		r.Config.Nodes, r.Config.Partitions, r.Config.Workers, r.Config.Concurrency, r.Leader)
	fmt.Fprintf(w, "machine: %d CPU, %s, %s %s\n", r.Machine.NProc, r.Machine.CPU, r.Machine.GoVersion, r.Machine.OS)
	if f := r.Fair; f != nil {
		fmt.Fprintln(w)
		f.write(w, r.Config)
	}
	if p := r.Priority; p != nil {
		fmt.Fprintln(w)
		p.write(w)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tn\tp50\tp90\tp99\tmax\tmean\t")
	row := func(name string, d *dist) {
		if d == nil || d.N == 0 {
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", name, d.N, d.P50, d.P90, d.P99, d.Max, d.Mean)
	}
	if f := r.Fair; f != nil {
		for _, k := range f.Keys {
			row(fmt.Sprintf("key %q: Workers' start → task held", k.Key), k.Dispatch)
		}
	}
	if p := r.Priority; p != nil {
		row("priority 5: CreateSession call → task held", p.CreateToHeld)
		row("  queued → StartAttempt proposed", p.QueuedToStart)
		row("  queued → task held", p.QueuedToHeld)
		row("priority 1: Workers' start → task held", p.BacklogDispatch)
	}
	row("fsync probe: 4 KiB write+fsync", r.Fsync)
	tw.Flush()
	fmt.Fprintf(w, "\nworker warnings: %d\n", r.WorkerWarnings)
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", r.Error)
	}
}

func (f *fairShare) write(w io.Writer, c fairnessConfig) {
	fmt.Fprintf(w, "fair share: %d sessions of key %q and %d of key %q, weight 1 each, one model Step a session, queued before the Workers started\n",
		c.Big, bigKey, c.Small, smallKey)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "drain\t%.2f s\t%.1f dispatched/s (first task held %.1f ms after the Workers started)\n", f.Seconds, f.DispatchPerSec, f.FirstMs)
	fmt.Fprintf(tw, "small key's share\t%.2f of fair\t%d of the first %d dispatches (fair: %d; goal ≥ %.1f: %s)\n",
		f.ShareOfFair, f.SmallInWindow, f.Window, f.Window/2, fairShareGoal, metOrMissed(f.GoalMet))
	fmt.Fprintf(tw, "small key's last\t%.1f ms\tafter the first dispatch; ideal %.1f ms (%d ÷ %.1f/s)\n", f.SmallDoneMs, f.IdealSmallDoneMs, f.Window, f.DispatchPerSec)
	for _, k := range f.Keys {
		if k.Missing > 0 {
			fmt.Fprintf(tw, "not dispatched\t%d\tsessions of key %q no Worker here held a task of\n", k.Missing, k.Key)
		}
	}
	tw.Flush()
}

func (p *priorityLoad) write(w io.Writer) {
	fmt.Fprintf(w, "priority: %d priority 1 sessions queued before the Workers started, %d priority 5 ones created one by one as they drained\n", p.Backlog, p.Urgent)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "drain\t%.2f s\t(Workers' start → last session done)\n", p.Seconds)
	fmt.Fprintf(tw, "priority 5 p99\t%.1f ms\tCreateSession call → a Worker holds its task (goal < %d ms: %s)\n", p.CreateToHeld.P99, urgentGoalMs, metOrMissed(p.GoalMet))
	fmt.Fprintf(tw, "backlog left\t%d\tpriority 1 Steps still queued when the last priority 5 one was dispatched\n", p.BacklogLeft)
	if p.UrgentMissing > 0 {
		fmt.Fprintf(tw, "not dispatched\t%d\tpriority 5 sessions no Worker here held a task of\n", p.UrgentMissing)
	}
	tw.Flush()
}
