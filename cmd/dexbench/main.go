// Command dexbench measures Dex end to end on a real local cluster: it
// starts three dexd processes (bin/dexd, fsync on) on loopback ports in a
// temporary directory, runs a pool of in-process Workers with a trivial
// model and a no-op read tool, drives many sessions at once and reports
// steps per second, sessions per second, dispatch latency (a Step queued →
// the Worker holds its task) and turn latency.
//
//	make build && go run ./cmd/dexbench [--sessions 200] [--workers 4] [--json]
//
// `dexbench --fairness` measures the dispatch order instead: a small
// fairness key beside a big backlog, and priority 5 Steps beside a backlog
// of priority 1 (fairness.go).
//
// `dexbench --stream N` measures live model output: N sessions stream their
// model's output to a watcher each, alone and beside the load run, which it
// compares with the same run without streams (stream.go).
//
// `dexbench --stream-floor N` measures the floor under --stream: N gRPC
// server streams of a delta event at --stream-floor-rate a second each, from
// a server process of dexbench's own to dexbench, with no Dex; it reports
// the CPU per message of each side (floor.go).
//
// `dexbench etcd [flags]` runs a put benchmark on a 3-member etcd before
// each Dex run, alternating, and prints the two side by side (etcd.go).
//
// Every process it starts is stopped by PID when it ends, also on an error
// or Ctrl-C.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

type options struct {
	binDir       string
	dir          string
	keep         bool
	workers      int
	concurrency  int
	sessions     int
	toolsPerTurn int
	warmup       int
	timeout      time.Duration
	jsonOut      bool
	dexdArgs     string
	tls          bool
	fsyncProbe   int
	dump         string
	idleSessions int
	idleBatch    int
	listPages    int
	sequential   int
	runs         int
	partitions   int
	steady       time.Duration
	token        string
	payload      byteSize
	fairnessKeys int
	priorities   bool
	fairness     fairnessOptions
	stream       streamOptions
	floor        floorOptions
	cpuProfile   string
}

func main() {
	args, name := os.Args[1:], "dexbench"
	if len(args) > 0 && args[0] == floorServeArg {
		os.Exit(serveFloor(args[1:]))
	}
	withEtcd := len(args) > 0 && args[0] == "etcd"
	if withEtcd {
		args, name = args[1:], "dexbench etcd"
	}
	o := options{}
	fs := benchFlags(name, &o)
	var eo etcdOptions
	if withEtcd {
		eo.register(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "dexbench:", err)
		os.Exit(2)
	}
	if withEtcd && (o.fairness.on || o.stream.n > 0 || o.floor.n > 0) {
		fmt.Fprintln(os.Stderr, "dexbench: --fairness, --stream and --stream-floor are modes of their own: run them without etcd")
		os.Exit(2)
	}
	if withEtcd {
		if err := eo.resolve(fs, o); err != nil {
			fmt.Fprintln(os.Stderr, "dexbench:", err)
			os.Exit(2)
		}
	}
	if o.sequential > 0 {
		o.sessions = o.sequential
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexbench:", err)
		os.Exit(2)
	}
	defer stopProfile()
	exit := func(code int) {
		stopProfile()
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.fairness.on {
		if code := fairnessOnce(ctx, o); code != 0 {
			stop()
			exit(code)
		}
		return
	}
	if o.floor.n > 0 {
		if code := streamFloorOnce(ctx, o); code != 0 {
			stop()
			exit(code)
		}
		return
	}
	if o.stream.n > 0 {
		if code := streamOnce(ctx, o); code != 0 {
			stop()
			exit(code)
		}
		return
	}
	if withEtcd {
		if code := benchWithEtcd(ctx, o, eo); code != 0 {
			stop()
			exit(code)
		}
		return
	}
	var reps []*report
	for i := range o.runs {
		if i > 0 && !o.jsonOut {
			fmt.Println()
		}
		rep, code := benchOnce(ctx, o)
		if code != 0 {
			exit(code)
		}
		reps = append(reps, rep)
	}
	if o.runs > 1 {
		if o.jsonOut {
			summarize(reps).writeJSON(os.Stdout)
		} else {
			summarize(reps).writeTable(os.Stdout)
		}
	}
}

// benchOnce runs the Dex bench once on a fresh cluster and prints its
// report. A non-zero code is the exit code dexbench must stop with.
func benchOnce(ctx context.Context, o options) (*report, int) {
	rep, err := run(ctx, o)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "dexbench: interrupted; every dexd it started is stopped")
		return nil, 130
	}
	if rep != nil {
		if o.jsonOut {
			rep.writeJSON(os.Stdout)
		} else {
			rep.writeTable(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexbench:", err)
		return rep, 1
	}
	return rep, 0
}

// benchFlags defines the flags of the Dex bench, which `dexbench etcd`
// takes too.
func benchFlags(name string, o *options) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&o.binDir, "bin", "bin", "directory holding dexd (make build)")
	fs.StringVar(&o.dir, "dir", "", "directory for the nodes' data and logs (default: a new temporary directory, removed at the end)")
	fs.BoolVar(&o.keep, "keep", false, "keep the data directory (and the nodes' logs) at the end")
	fs.IntVar(&o.workers, "workers", 4, "in-process Workers")
	fs.IntVar(&o.concurrency, "concurrency", 8, "tasks each Worker runs at once")
	fs.IntVar(&o.sessions, "sessions", 200, "sessions driven at once, each created with a first message")
	fs.IntVar(&o.toolsPerTurn, "tools-per-turn", 2, "read tool calls in the model's first output of a turn")
	fs.IntVar(&o.warmup, "warmup", 8, "sessions run (and not measured) before the measured run")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up the measured run after this long")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&o.dexdArgs, "dexd-args", "", "extra flags for every dexd, space separated")
	fs.StringVar(&o.token, "token", "", "ACL token secret for the bench's clients and Workers (default $DEX_TOKEN; an admin token, e.g. with --dexd-args \"--acl-bootstrap-token-file F\")")
	fs.BoolVar(&o.tls, "tls", false, "run the cluster and the Workers on mutual TLS (a CA and certificates made in the data directory; DEX_CHAOS_TLS=1 does the same)")
	fs.IntVar(&o.fsyncProbe, "fsync-probe", 50, "write+fsync this many 4 KiB blocks in the data directory first and report the latency (0: skip)")
	fs.StringVar(&o.dump, "dump", "", "write every measured session with its Steps to this file, one JSON object a line")
	fs.IntVar(&o.idleSessions, "idle-sessions", 0, "before the warm-up, load this many idle one-turn sessions into the state (prefix idle)")
	fs.IntVar(&o.idleBatch, "idle-batch", 500, "idle sessions created at once during the idle load")
	fs.IntVar(&o.listPages, "list-pages", 0, "with --idle-sessions: give the idle sessions an agent (one of 10) and labels (a team of 20, an env of 3), and after their load read this many pages of 50 through ListSessions for each of eight filters, one call at a time; reports each filter's page latency (0: off)")
	fs.DurationVar(&o.steady, "steady", 0, "after the measured run, keep driving rounds of --sessions sessions for this long and report how many elections happened meanwhile (0: skip)")
	fs.IntVar(&o.sequential, "sequential", 0, "drive this many sessions one after another instead of --sessions at once (unloaded latency)")
	fs.IntVar(&o.partitions, "partitions", 1, "the cluster's partitions (dexd --partitions): each its own raft group, the leaders spread over the three nodes; entries are summed over the partitions")
	fs.IntVar(&o.runs, "runs", 1, "run the whole bench this many times, each on a fresh cluster, and print the medians after the reports")
	fs.Var(&o.payload, "payload", "bytes of filler in every model output's text and every tool result (4096, 4KiB; 0: the short texts \"looking\", \"ok\", \"done\")")
	fs.IntVar(&o.fairnessKeys, "fairness-keys", 0, "give the warm-up, measured and --steady sessions one of this many fairness keys (round robin, weight 1), to compare steps/s with flow control against a run without (0: none)")
	fs.BoolVar(&o.priorities, "priorities", false, "with --fairness-keys, give the sessions priorities 1 to 5 too (strict priority changes which sessions run at the end of a run, so it changes the load's shape, not only its cost)")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile (pprof) of dexbench itself (its Workers, watchers and drivers), from start to end, to this file")
	o.fairness.register(fs)
	o.stream.register(fs)
	o.floor.register(fs)
	return fs
}

// check refuses flags dexbench cannot run with.
func (o *options) check() error {
	if o.workers < 1 || o.concurrency < 1 || o.sessions < 1 || o.toolsPerTurn < 0 || o.warmup < 0 {
		return errors.New("--workers, --concurrency and --sessions must be at least 1; --tools-per-turn and --warmup at least 0")
	}
	if o.steady < 0 {
		return errors.New("--steady must not be negative")
	}
	if o.idleSessions < 0 || o.idleBatch < 1 || o.sequential < 0 {
		return errors.New("--idle-sessions and --sequential must be at least 0, --idle-batch at least 1")
	}
	if o.runs < 1 {
		return errors.New("--runs must be at least 1")
	}
	if o.partitions < 0 || o.partitions > 64 {
		return errors.New("--partitions must be between 1 and 64 (0: 1)")
	}
	if o.payload > maxPayload {
		return fmt.Errorf("--payload must be at most %s: a turn's last model input holds three payloads, and dexd refuses a model input over half of --max-payload", formatSize(maxPayload))
	}
	if o.sessions > maxIndex || o.idleSessions > maxIndex || o.sequential > maxIndex || o.warmup > maxIndex {
		return fmt.Errorf("--sessions, --idle-sessions, --sequential and --warmup must be at most %d", maxIndex)
	}
	if o.fairnessKeys < 0 {
		return errors.New("--fairness-keys must not be negative")
	}
	if err := checkList(*o); err != nil {
		return err
	}
	if err := o.stream.check(*o); err != nil {
		return err
	}
	if err := o.floor.check(*o); err != nil {
		return err
	}
	return o.fairness.check(*o)
}

// arrival is when a Worker got one attempt of a Step.
type arrival struct {
	attempt uint32
	held    time.Time // the task arrived (before the claim)
	handler time.Time // the model or tool handler started (after the claim)
}

// recorder keeps the arrival times, keyed by Step id.
type recorder struct {
	mu sync.Mutex
	m  map[string]*arrival
}

func (r *recorder) held(stepID string, attempt uint32) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.m[stepID]; a != nil && a.attempt > attempt {
		return
	}
	r.m[stepID] = &arrival{attempt: attempt, held: now}
}

func (r *recorder) handler(stepID string, attempt uint32) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.m[stepID]; a != nil && a.attempt == attempt {
		a.handler = now
	}
}

func (r *recorder) get(stepID string) *arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[stepID]
}

// benchModel answers a turn's first RunModel with k noop calls and the
// tool-result RunModel with text. With a payload, both outputs' text is the
// payload.
func benchModel(rec *recorder, fin *finishes, k int, payload string) client.ModelHandler {
	text := func(short string) string {
		if payload != "" {
			return payload
		}
		return short
	}
	return client.ModelFuncs{Run: func(ctx context.Context, in client.ModelInput) (*dexv1.ModelOutput, error) {
		if out, ok := idleModel(in); ok {
			fin.answered(in.StepID, in.SessionID)
			return out, nil
		}
		rec.handler(in.StepID, in.Attempt)
		results := 0
		for i := len(in.History) - 1; i >= 0; i-- {
			kind := in.History[i].Kind
			if kind == dexv1.HistoryKind_HISTORY_KIND_USER {
				break
			}
			if kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT {
				results++
			}
		}
		if results > 0 || k == 0 {
			fin.answered(in.StepID, in.SessionID)
			return &dexv1.ModelOutput{Text: text("done")}, nil
		}
		out := &dexv1.ModelOutput{Text: text("looking")}
		for i := range k {
			out.ToolCalls = append(out.ToolCalls, &dexv1.ToolCall{CallId: fmt.Sprintf("call-%d", i+1), Tool: "noop", Arguments: "{}"})
		}
		return out, nil
	}}
}

// noopTool returns the payload as its result ("ok" without one).
func noopTool(rec *recorder, payload string) client.Tool {
	result := payload
	if result == "" {
		result = "ok"
	}
	return client.Tool{
		Spec: &dexv1.ToolSpec{Name: "noop", Access: dexv1.ToolAccess_TOOL_ACCESS_READ, Description: "Does nothing."},
		Run: func(ctx context.Context, c client.ToolCall) (client.ToolResult, error) {
			rec.handler(c.StepID, c.Attempt)
			return client.ToolResult{Content: result}, nil
		},
	}
}

// warnCounter counts the Workers' warnings and errors (they are also
// written to stderr).
type warnCounter struct{ n atomic.Int64 }

func (w *warnCounter) logger() *zap.Logger {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zapcore.WarnLevel)
	cfg.OutputPaths = []string{"stderr"}
	cfg.Sampling = nil
	l, err := cfg.Build(zap.Hooks(func(zapcore.Entry) error { w.n.Add(1); return nil }))
	if err != nil {
		return zap.NewNop()
	}
	return l
}

func run(ctx context.Context, o options) (rep *report, err error) {
	if err := findDexd(o); err != nil {
		return nil, err
	}
	dir, err := benchDir(o)
	if err != nil {
		return nil, err
	}
	defer func() { releaseDir(ctx, o, dir, err) }()

	rep = newReport(o)
	if o.fsyncProbe > 0 {
		if rep.Fsync, err = probeFsync(dir, o.fsyncProbe); err != nil {
			return rep, fmt.Errorf("fsync probe: %w", err)
		}
	}
	c, err := startCluster(ctx, o, dir)
	if err != nil {
		return rep, err
	}
	// Stop every node by PID whatever happens below (Ctrl-C included:
	// the nodes run in their own process groups and never see it).
	defer c.StopAll()
	for _, n := range c.Nodes {
		rep.PIDs = append(rep.PIDs, n.PID())
	}
	rep.Leader = c.leader.ID
	memReady := sampleMemory("after_ready", c.pids)
	rep.Memory = append(rep.Memory, memReady)
	defer func() {
		if rep != nil {
			rep.Memory = append(rep.Memory, sampleMemory("end", c.pids))
		}
	}()

	rec, fin := &recorder{m: map[string]*arrival{}}, newFinishes()
	payload := filler(int(o.payload))
	warns := &warnCounter{}
	wlog := warns.logger()
	defer func() { _ = wlog.Sync() }()

	workers, err := startWorkers(ctx, c, o, "bench-w", benchWorkerOptions(o, rec, fin, o.toolsPerTurn, payload, wlog))
	if err != nil {
		return rep, err
	}
	defer workers.close()

	cc, err := client.Dial(c.Target(), benchDialOptions(o.token, c.Cluster)...)
	if err != nil {
		return rep, err
	}
	defer cc.Close()
	cl := client.New(cc)
	svc := dexv1.NewSessionServiceClient(cc)
	shape := flowShape(o.fairnessKeys, o.priorities)

	if o.idleSessions > 0 {
		leaderIndex := func() float64 { return scrape(c.httpAddrs)[c.leader.ID]["dex_raft_commit_index"] }
		var idleShape sessionShape
		if o.listPages > 0 {
			idleShape = listShape
			lw := benchWorkerOptions(o, rec, fin, o.toolsPerTurn, payload, wlog)
			lw.Tools, lw.Agents = nil, listAgents()
			listWorkers, err := startWorkers(ctx, c, o, "list-w", lw)
			if err != nil {
				return rep, err
			}
			defer listWorkers.close()
		}
		rep.IdleLoad, err = loadIdle(ctx, cl, svc, fin, o.idleSessions, o.idleBatch, o.timeout, leaderIndex, idleShape)
		if err != nil {
			return rep, err
		}
		memIdle := sampleMemory("after_idle_load", c.pids)
		rep.Memory = append(rep.Memory, memIdle)
		rep.RSSPerIdleSession = growthPerSession(memReady, memIdle, c.leader.ID, o.idleSessions)
		if o.listPages > 0 {
			waited, share := settle(ctx, time.Minute)
			rep.List = &listReport{SettledSeconds: math.Round(waited.Seconds()), BusyAtStart: math.Round(share*1000) / 10}
			if rep.List.Filters, err = measureList(ctx, svc, o.listPages); err != nil {
				return rep, err
			}
		}
	}

	// Warm-up: the Workers register and every channel connects.
	if o.warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, _, _, werr := drive(wctx, cl, svc, fin, idRange{prefix: "warmup", n: o.warmup}, shape)
		cancel()
		if werr != nil {
			return rep, fmt.Errorf("warm-up: %w", werr)
		}
	}
	// --stream: the stream sessions stream alone, then keep streaming
	// through the measured run (stream.go).
	if streams := o.stream.load; streams != nil {
		defer streams.close()
		if err := streams.begin(ctx, c); err != nil {
			return rep, err
		}
	}

	before, cpu0, m0, sys0 := scrape(c.httpAddrs), selfCPU(), machineCPU(), sumProcCounts(c.pids)
	mctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var (
		start, end time.Time
		creates    []float64
		derr       error
	)
	if o.sequential > 0 {
		start, end, creates, derr = driveSequential(mctx, cl, svc, fin, "bench", o.sequential, shape)
	} else {
		start, end, creates, derr = drive(mctx, cl, svc, fin, idRange{prefix: "bench", n: o.sessions}, shape)
	}
	rep.Create = newDist(creates)
	after, sys1 := scrape(c.httpAddrs), sumProcCounts(c.pids)
	rep.setRaft(before, after, c.leader.ID, end.Sub(start))
	rep.Raft.Calls = newCallStats(before, after, sys0, sys1)
	rep.Raft.CPUSeconds["dexbench"] = math.Round((selfCPU()-cpu0)*100) / 100
	if m1 := machineCPU(); m0.total > 0 && m1.total > m0.total {
		// Busy share of all CPUs during the run, every process counted.
		rep.MachineBusy = math.Round((m1.busy-m0.busy)/(m1.total-m0.total)*1000) / 10
		rep.MachineBusyCPUSeconds = math.Round((m1.busy-m0.busy)*100) / 100
	}
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	if streams := o.stream.load; streams != nil && derr == nil {
		derr = streams.end(ctx, start, end)
	}
	if o.steady > 0 && derr == nil {
		rep.Steady = runSteady(ctx, cl, svc, fin, o.sessions, o.steady, c.httpAddrs, shape)
	}

	// Collect every measured session and its Steps.
	gctx, gcancel := context.WithTimeout(ctx, 60*time.Second)
	defer gcancel()
	sessions, cerr := collect(gctx, cl, "bench", o.sessions)
	rep.analyse(sessions, rec, start, end)
	if o.dump != "" {
		if err := dumpSessions(o.dump, sessions); err != nil {
			return rep, err
		}
	}
	rep.WorkerWarnings = warns.n.Load()
	if derr != nil {
		rep.Error = derr.Error()
		return rep, derr
	}
	if cerr != nil {
		rep.Error = cerr.Error()
		return rep, cerr
	}
	return rep, nil
}

// findDexd checks that --bin holds dexd before anything is made.
func findDexd(o options) error {
	dexd := filepath.Join(o.binDir, "dexd")
	if _, err := os.Stat(dexd); err != nil {
		return fmt.Errorf("%s not found: run `make build` first (%v)", dexd, err)
	}
	return nil
}

// benchDir is the directory for the nodes' data and logs: --dir, or a new
// temporary one.
func benchDir(o options) (string, error) {
	if o.dir == "" {
		return os.MkdirTemp("", "dexbench-")
	}
	return o.dir, os.MkdirAll(o.dir, 0o755)
}

// releaseDir removes the temporary data directory at the end of a run, and
// keeps it (saying where) with --keep or after an error other than Ctrl-C.
func releaseDir(ctx context.Context, o options, dir string, err error) {
	if o.keep || (err != nil && ctx.Err() == nil) {
		fmt.Fprintf(os.Stderr, "dexbench: data and node logs kept in %s\n", dir)
		return
	}
	if o.dir == "" {
		_ = os.RemoveAll(dir)
	}
}

// benchCluster is a started cluster of three dexd and what the bench reads
// of it.
type benchCluster struct {
	*harness.Cluster
	leader    *harness.Node
	pids      map[string]int    // by node id
	httpAddrs map[string]string // the nodes' /metrics, by node id
}

// startCluster starts three dexd (bin/dexd, fsync on) in dir and waits for a
// leader, and with partitions for the leaderships to spread over the nodes.
// On an error it stops every node it started.
func startCluster(ctx context.Context, o options, dir string) (_ *benchCluster, err error) {
	copts := harness.ClusterOptions{BinDir: o.binDir, Dir: dir, Size: 3, Args: strings.Fields(o.dexdArgs), Partitions: o.partitions}
	if o.tls {
		if copts.TLS, err = harness.NewPKI(filepath.Join(dir, "tls")); err != nil {
			return nil, err
		}
	}
	c, err := harness.NewCluster(copts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.StopAll()
		}
	}()
	if err := c.Start(); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	leader, err := c.WaitReady(rctx)
	if err == nil && o.partitions > 1 {
		// Measure once the leaderships are spread over the nodes.
		leader, err = c.WaitSpread(rctx, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster not ready: %w", err)
	}
	bc := &benchCluster{Cluster: c, leader: leader, pids: map[string]int{}, httpAddrs: map[string]string{}}
	for _, n := range c.Nodes {
		bc.pids[n.ID] = n.PID()
		bc.httpAddrs[n.ID] = n.HTTPAddr
	}
	return bc, nil
}

// benchWorkerOptions are the options of every bench Worker but its id: the
// noop tool, the bench model with k noop calls a turn, and the Hold hook
// that records when a task arrived and when its result was reported.
func benchWorkerOptions(o options, rec *recorder, fin *finishes, k int, payload string, log *zap.Logger) client.WorkerOptions {
	return client.WorkerOptions{
		Tools:       []client.Tool{noopTool(rec, payload)},
		Model:       benchModel(rec, fin, k, payload),
		Concurrency: o.concurrency,
		PollWait:    5 * time.Second,
		Logger:      log,
		Hold: func(moment string, t *dexv1.Task) {
			switch moment {
			case client.HoldBeforeClaim:
				rec.held(t.GetRef().GetStepId(), t.GetRef().GetAttempt())
			case client.HoldAfterResultSent:
				fin.completed(t.GetRef().GetStepId())
			}
		},
	}
}

// workerPool is --workers in-process Workers, each on its own channel like
// a separate process.
type workerPool struct {
	stop  context.CancelFunc
	wg    sync.WaitGroup
	conns []*grpc.ClientConn
}

// startWorkers runs the pool's Workers, named name1, name2…, until close.
func startWorkers(ctx context.Context, c *benchCluster, o options, name string, opts client.WorkerOptions) (*workerPool, error) {
	wctx, stop := context.WithCancel(ctx)
	p := &workerPool{stop: stop}
	for i := range o.workers {
		cc, err := client.Dial(c.Target(), benchDialOptions(o.token, c.Cluster)...)
		if err != nil {
			p.close()
			return nil, err
		}
		p.conns = append(p.conns, cc)
		wo := opts
		wo.ID = fmt.Sprintf("%s%d", name, i+1)
		w, err := client.NewWorker(cc, wo)
		if err != nil {
			p.close()
			return nil, err
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if err := w.Run(wctx); err != nil {
				fmt.Fprintf(os.Stderr, "dexbench: worker %s: %v\n", w.ID(), err)
			}
		}()
	}
	return p, nil
}

// close stops the Workers (each deregisters), waits for them and closes
// their channels.
func (p *workerPool) close() {
	p.stop()
	p.wg.Wait()
	for _, cc := range p.conns {
		_ = cc.Close()
	}
	p.conns = nil
}

func sessionID(prefix string, i int) string { return fmt.Sprintf("%s-%06d", prefix, i) }

// sessionShape fills in session i's create request beyond its id and first
// message (flowShape, the --fairness sessions).
type sessionShape func(i int, req *dexv1.CreateSessionRequest)

// drive creates the sessions of r at once, each with a first message and
// shaped by shape (nil: none), and waits until every one is idle again (or
// errored or paused). It returns the time before the first CreateSession
// and the time the last session was seen done.
func drive(ctx context.Context, cl *client.Client, svc dexv1.SessionServiceClient, fin *finishes, r idRange, shape sessionShape) (start, end time.Time, creates []float64, err error) {
	start = time.Now()
	if creates, err = createAll(ctx, cl, r, shape, r.n); err != nil {
		return start, time.Now(), creates, err
	}
	end, err = waitDone(ctx, svc, fin, r)
	return start, end, creates, err
}

// createAll creates the sessions of r, each with a first message and shaped
// by shape (nil: none), at most limit at once. creates[i] is session i's
// CreateSession call in ms; err is the first that failed.
func createAll(ctx context.Context, cl *client.Client, r idRange, shape sessionShape, limit int) (creates []float64, err error) {
	var (
		wg      sync.WaitGroup
		errMu   sync.Mutex
		firstEr error
	)
	creates = make([]float64, r.n)
	slots := make(chan struct{}, limit)
	for i := range r.n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			req := &dexv1.CreateSessionRequest{SessionId: r.id(i), Message: "go"}
			if shape != nil {
				shape(r.from+i, req)
			}
			t := time.Now()
			_, err := cl.CreateSession(ctx, req)
			creates[i] = ms(time.Since(t))
			if err != nil {
				errMu.Lock()
				if firstEr == nil {
					firstEr = fmt.Errorf("create session %s: %w", r.id(i), err)
				}
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return creates, firstEr
}

// driveSequential drives k sessions one after another, each alone in the
// cluster, so their latencies are those of an unloaded cluster.
func driveSequential(ctx context.Context, cl *client.Client, svc dexv1.SessionServiceClient, fin *finishes, prefix string, k int, shape sessionShape) (start, end time.Time, creates []float64, err error) {
	start = time.Now()
	for i := range k {
		var c []float64
		_, end, c, err = drive(ctx, cl, svc, fin, idRange{prefix: prefix, from: i, n: 1}, shape)
		creates = append(creates, c...)
		if err != nil {
			return start, end, creates, err
		}
	}
	return start, end, creates, nil
}

// collect reads every session of the run with its Steps.
func collect(ctx context.Context, cl *client.Client, prefix string, n int) ([]*dexv1.GetSessionResponse, error) {
	out := make([]*dexv1.GetSessionResponse, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = cl.GetSession(ctx, sessionID(prefix, i))
		}()
	}
	wg.Wait()
	var got []*dexv1.GetSessionResponse
	for _, r := range out {
		if r != nil {
			got = append(got, r)
		}
	}
	return got, errors.Join(errs...)
}

func dumpSessions(path string, sessions []*dexv1.GetSessionResponse) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, s := range sessions {
		b, err := protojson.Marshal(s)
		if err != nil {
			f.Close()
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// probeFsync writes and fsyncs n blocks of 4 KiB to a file in dir, the way
// the raft log commits an entry, and returns the latency distribution.
func probeFsync(dir string, n int) (*dist, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var d []float64
	for range n {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		d = append(d, ms(time.Since(t)))
	}
	return newDist(d), nil
}

// selfCPU is the CPU time (user + system, seconds) this process used so
// far: the Workers and the client.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

type cpuTimes struct{ busy, total float64 }

// machineCPU reads the CPU time of the whole machine (seconds, every CPU)
// from /proc/stat: busy is everything but idle and iowait.
func machineCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var t cpuTimes
	for i, v := range f[1:] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return cpuTimes{}
		}
		n /= 100 // USER_HZ
		t.total += n
		if i != 3 && i != 4 { // idle, iowait
			t.busy += n
		}
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchDialOptions are the cluster's (TLS, and the harness's admin token
// with $DEX_CHAOS_ACL=1) plus --token or $DEX_TOKEN when the harness made
// no token.
func benchDialOptions(flag string, c *harness.Cluster) []grpc.DialOption {
	t := client.TokenFrom(flag)
	if t == "" || c.AdminToken != "" {
		return c.DialOptions()
	}
	return append(c.DialOptions(), client.WithToken(t))
}
