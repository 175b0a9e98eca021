package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
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
	if rep == nil {
		return printReport(ctx, o, nil, err, "every dexd it started is stopped")
	}
	return printReport(ctx, o, rep, err, "every dexd it started is stopped")
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
