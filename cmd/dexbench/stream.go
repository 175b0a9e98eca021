package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The --stream mode measures live model output (docs/design/streaming.md):
// how long a delta takes from a Worker's model handler (ModelInput.Stream)
// to a watcher (WatchSession with WithLiveOutput), and what streaming costs
// the rest of the load. It runs the bench twice, each time on a fresh
// cluster:
//
//   - without streams: the usual measured run of --sessions at once;
//   - with streams: after the warm-up, --stream sessions of an agent of
//     their own, served by Workers of their own, each stream one turn of
//     --stream-deltas deltas at --stream-rate a second with nothing else
//     running (with --stream 1, the unloaded latency); then they stream
//     turns back to back through the same measured run.
//
// Workers and watchers are in this process: the handler notes the time just
// before each Stream call, keyed by (session, Step, attempt, offset), and
// each session's watcher the time the delta arrived. Every streamed
// attempt's text, as its watcher got it, must equal the committed output.
const (
	streamPrefix = "stream"
	// streamAgent is the stream sessions' agent: only the stream Workers run
	// its model, so the measured sessions keep the Workers of the plain run.
	streamAgent = "stream"
	// watchersPerConn is how many stream sessions' watches share a client
	// channel.
	watchersPerConn = 100
	// rssEvery is how often the leader's RSS is read while the streams run.
	rssEvery = 100 * time.Millisecond
	// The goals: a delta reaches an unloaded watcher within 5 ms at p50 and
	// 20 ms at p99; the measured run keeps 90 % of its Steps/s beside the
	// streams.
	streamP50GoalMs = 5
	streamP99GoalMs = 20
	streamStepsGoal = 0.9
	// streamEndDeadline bounds, past a turn's time, how long the stream
	// sessions take to finish their turn once the measured run is over.
	streamEndDeadline = 30 * time.Second
)

type streamOptions struct {
	n      int
	deltas int
	rate   float64
	// load, set for the run with streams, runs the stream sessions beside
	// the measured run (run in main.go calls it).
	load *streamLoad
}

func (s *streamOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&s.n, "stream", 0, "measure live model output: run the bench without streams, then on a fresh cluster with this many sessions streaming their model's output to a watcher each, alone and beside the measured run (0: the plain run)")
	// 600 at 20/s is a 30-second answer: each stream outlasts the measured
	// run, which then pays for the streaming, not for the stream sessions'
	// own turns (with 2-second turns, 1,000 streams are 500 more turns a
	// second beside it).
	fs.IntVar(&s.deltas, "stream-deltas", 600, "--stream: deltas a stream session's model streams each turn (600 at 20/s: a 30-second answer, longer than the measured run)")
	fs.Float64Var(&s.rate, "stream-rate", 20, "--stream: deltas a second each stream session's model streams")
}

// check refuses what --stream cannot run with.
func (s streamOptions) check(o options) error {
	if s.n < 0 {
		return errors.New("--stream must not be negative")
	}
	if s.n == 0 {
		return nil
	}
	if s.n > maxIndex {
		return fmt.Errorf("--stream must be at most %d", maxIndex)
	}
	if s.deltas < 1 || s.rate <= 0 || s.rate > 1000 {
		return errors.New("--stream-deltas must be at least 1, --stream-rate above 0 and at most 1000")
	}
	if o.runs > 1 || o.fairness.on || o.steady > 0 || o.sequential > 0 {
		return errors.New("--stream runs the bench twice itself and drives the sessions at once: drop --runs, --fairness, --steady and --sequential")
	}
	return nil
}

// every is the time between two deltas of a turn.
func (s streamOptions) every() time.Duration { return time.Duration(float64(time.Second) / s.rate) }

// streamLoad runs the stream sessions during the run with streams: begin
// (after the warm-up) creates them, streams a turn of each alone, then
// keeps them streaming; end (after the measured run) lets them finish and
// checks their text.
type streamLoad struct {
	opt     streamOptions
	o       options
	clock   *deltaClock
	warns   *warnCounter
	leader  int // the leader's PID
	workers *workerPool
	conns   []*grpc.ClientConn
	clients []*client.Client
	ss      []*streamSession

	stopWatches context.CancelFunc
	watches     sync.WaitGroup

	// Beside the load.
	stopping    atomic.Bool
	cancelTurns context.CancelFunc
	drivers     sync.WaitGroup
	driverErrs  []error
	streaming   chan struct{} // one a session, once its first turn beside the load streams
	failed      chan error
	besideRSS   *rssPeak

	res streamResult
}

func newStreamLoad(o options) *streamLoad {
	return &streamLoad{opt: o.stream, o: o, clock: newDeltaClock(), warns: &warnCounter{}}
}

func (l *streamLoad) client(i int) *client.Client { return l.clients[i%len(l.clients)] }

// begin starts the stream Workers, creates and watches the stream sessions,
// streams one turn of each alone, then starts their turns beside the load
// and returns once each streams.
func (l *streamLoad) begin(ctx context.Context, c *benchCluster) error {
	l.leader = c.pids[c.leader.ID]
	l.res.LeaderRSSBefore = readProcMem(l.leader).RSS
	if err := l.start(ctx, c); err != nil {
		return err
	}
	l.res.LeaderRSSWatched = readProcMem(l.leader).RSS
	if err := l.alone(ctx); err != nil {
		return fmt.Errorf("streams alone: %w", err)
	}
	return l.startBeside(ctx)
}

// start runs the stream Workers, creates the sessions and watches each.
func (l *streamLoad) start(ctx context.Context, c *benchCluster) error {
	wlog := l.warns.logger()
	opts := client.WorkerOptions{
		Model:       streamModel(l.clock, l.opt.deltas, l.opt.every()),
		Agents:      []string{streamAgent},
		Concurrency: (l.opt.n + l.o.workers - 1) / l.o.workers,
		PollWait:    5 * time.Second,
		Logger:      wlog,
	}
	var err error
	if l.workers, err = startWorkers(ctx, c, l.o, "stream-w", opts); err != nil {
		return err
	}
	for range (l.opt.n + watchersPerConn - 1) / watchersPerConn {
		cc, err := client.Dial(c.Target(), benchDialOptions(l.o.token, c.Cluster)...)
		if err != nil {
			return err
		}
		l.conns = append(l.conns, cc)
		l.clients = append(l.clients, client.New(cc))
	}
	cctx, cancel := context.WithTimeout(ctx, l.o.timeout)
	defer cancel()
	r := idRange{prefix: streamPrefix, n: l.opt.n}
	err = forEach(cctx, r.n, createBatch, func(ctx context.Context, i int) error {
		_, err := l.client(i).CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: r.id(i), Agent: streamAgent})
		if err != nil {
			return fmt.Errorf("create session %s: %w", r.id(i), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	l.stopWatches = stop
	for i := range r.n {
		s := newStreamSession(r.id(i))
		l.ss = append(l.ss, s)
		cl := l.client(i)
		l.watches.Add(1)
		go func() {
			defer l.watches.Done()
			err := cl.WatchSession(wctx, s.id, 0, func(e *dexv1.Event) error {
				s.observe(e, time.Now(), l.clock)
				return nil
			}, client.WithLiveOutput())
			if wctx.Err() == nil {
				s.fail(fmt.Errorf("the watch ended: %v", err))
			}
		}()
	}
	// The first event (session_created) comes once the watch holds its
	// subscription to the live output.
	return forEach(cctx, len(l.ss), len(l.ss), func(ctx context.Context, i int) error {
		s := l.ss[i]
		return s.await(ctx, "its watch to start", func() bool { return s.events > 0 })
	})
}

// forEach runs f(ctx, 0) … f(ctx, n-1), at most limit at once, and returns
// the first error; the first error cancels the ctx the others get.
func forEach(ctx context.Context, n, limit int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	slots := make(chan struct{}, max(limit, 1))
	for i := range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := f(ctx, i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// alone streams one turn of every stream session, nothing else running.
func (l *streamLoad) alone(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, l.o.timeout)
	defer cancel()
	rss := watchRSS(l.leader)
	leaderCPU, benchCPU := procCPUSeconds(l.leader), selfCPU()
	t0 := time.Now()
	err := forEach(actx, len(l.ss), len(l.ss), func(ctx context.Context, i int) error {
		s := l.ss[i]
		if err := s.sendTurn(ctx, l.client(i), 1); err != nil {
			return err
		}
		return s.finishTurn(ctx, 1)
	})
	t1 := time.Now()
	leaderCPU, benchCPU = procCPUSeconds(l.leader)-leaderCPU, selfCPU()-benchCPU
	peak := rss.end()
	if err != nil {
		return err
	}
	l.res.Alone = newStreamPhase(l.clock.between(t0, t1), len(l.ss), t1.Sub(t0), l.opt.rate, peak)
	l.res.Alone.LeaderCPUSeconds, l.res.Alone.BenchCPUSeconds = round2(leaderCPU), round2(benchCPU)
	l.res.RSSPerStream = perStream(l.res.LeaderRSSBefore, peak, len(l.ss))
	l.res.RSSPerStreamStreaming = perStream(l.res.LeaderRSSWatched, peak, len(l.ss))
	return nil
}

// startBeside starts every stream session's turns back to back, until end,
// and returns once each one's first turn streams.
func (l *streamLoad) startBeside(ctx context.Context) error {
	tctx, cancel := context.WithCancel(ctx)
	l.cancelTurns = cancel
	l.streaming, l.failed = make(chan struct{}, len(l.ss)), make(chan error, len(l.ss))
	l.driverErrs = make([]error, len(l.ss))
	l.besideRSS = watchRSS(l.leader)
	for i, s := range l.ss {
		l.drivers.Add(1)
		go func() {
			defer l.drivers.Done()
			if err := l.turns(tctx, i, s); err != nil {
				l.driverErrs[i] = err
				l.failed <- err
			}
		}()
	}
	sctx, scancel := context.WithTimeout(ctx, l.o.timeout)
	defer scancel()
	for range l.ss {
		select {
		case <-l.streaming:
		case err := <-l.failed:
			return fmt.Errorf("streams beside the load: %w", err)
		case <-sctx.Done():
			return fmt.Errorf("streams beside the load: not every session streaming: %w", sctx.Err())
		}
	}
	return nil
}

// turns streams session i's turns back to back until end asks it to stop,
// saying once its first turn's output arrives.
func (l *streamLoad) turns(ctx context.Context, i int, s *streamSession) error {
	first := true
	for k := 2; ; k++ {
		if err := s.sendTurn(ctx, l.client(i), k); err != nil {
			return err
		}
		if first {
			if err := s.await(ctx, "its output", func() bool { return len(s.streamed) >= k }); err != nil {
				return err
			}
			l.streaming <- struct{}{}
			first = false
		}
		if err := s.finishTurn(ctx, k); err != nil {
			return err
		}
		if l.stopping.Load() {
			return nil
		}
	}
}

// end lets every stream session finish its turn once the measured run
// (start to stop) is over, and checks every session's streamed text against
// its committed output.
func (l *streamLoad) end(ctx context.Context, start, stop time.Time) error {
	l.stopping.Store(true)
	done := make(chan struct{})
	go func() { l.drivers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(l.opt.turnTime() + streamEndDeadline):
		l.cancelTurns()
		<-done
	}
	peak := l.besideRSS.end()
	if err := errors.Join(l.driverErrs...); err != nil {
		return fmt.Errorf("streams beside the load: %w", err)
	}
	turns := 0
	for _, s := range l.ss {
		s.mu.Lock()
		turns += s.turns - 1
		s.mu.Unlock()
	}
	l.res.Beside = newStreamPhase(l.clock.between(start, stop), turns, stop.Sub(start), l.opt.rate, peak)
	return l.check(ctx)
}

// turnTime is how long a stream turn's deltas take.
func (s streamOptions) turnTime() time.Duration { return time.Duration(s.deltas) * s.every() }

// check compares every stream session's watched text with its committed
// output.
func (l *streamLoad) check(ctx context.Context) error {
	gctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	err := forEach(gctx, len(l.ss), 16, func(ctx context.Context, i int) error {
		s := l.ss[i]
		gs, err := l.client(i).GetSession(ctx, s.id)
		if err != nil {
			return fmt.Errorf("read session %s: %w", s.id, err)
		}
		texts, ended, problems, abandoned := s.received()
		checked, mismatches := compareStreamed(s.id, committedOutputs(gs), texts, ended)
		mu.Lock()
		defer mu.Unlock()
		l.res.StepsChecked += checked
		l.res.Abandoned += abandoned
		for _, p := range problems {
			l.res.TextMismatches = append(l.res.TextMismatches, fmt.Sprintf("session %s: %s", s.id, p))
		}
		l.res.TextMismatches = append(l.res.TextMismatches, mismatches...)
		return nil
	})
	slices.Sort(l.res.TextMismatches)
	l.res.NotReceived = l.clock.pending()
	if err != nil {
		return err
	}
	if n := len(l.res.TextMismatches); n > 0 {
		return fmt.Errorf("%d streamed outputs differ from what their watcher got, the first: %s", n, l.res.TextMismatches[0])
	}
	return nil
}

// close stops the watches and the stream Workers and closes the channels.
func (l *streamLoad) close() {
	if l.cancelTurns != nil {
		l.cancelTurns()
		l.drivers.Wait()
	}
	if l.besideRSS != nil {
		l.besideRSS.end()
	}
	if l.stopWatches != nil {
		l.stopWatches()
		l.watches.Wait()
	}
	if l.workers != nil {
		l.workers.close()
	}
	for _, cc := range l.conns {
		_ = cc.Close()
	}
	l.res.WorkerWarnings = l.warns.n.Load()
}

type streamConfig struct {
	Streams int     `json:"streams"`
	Deltas  int     `json:"deltas_per_turn"`
	Rate    float64 `json:"deltas_per_sec"`
	// Bytes of a delta's text.
	DeltaBytes        int `json:"delta_bytes"`
	Sessions          int `json:"sessions"`
	Workers           int `json:"workers"`
	Concurrency       int `json:"concurrency_per_worker"`
	StreamConcurrency int `json:"stream_concurrency_per_worker"`
	Nodes             int `json:"nodes"`
	Partitions        int `json:"partitions"`
}

type streamReport struct {
	Bench   string       `json:"bench"` // "stream"
	Machine machine      `json:"machine"`
	Config  streamConfig `json:"config"`
	// The measured run without streams, then on a fresh cluster with them.
	Plain  *report       `json:"without_streams,omitempty"`
	Loaded *report       `json:"with_streams,omitempty"`
	Stream *streamResult `json:"stream,omitempty"`
	// Steps/s with streams ÷ without. Goal ≥ 0.9.
	StepsRatio   float64 `json:"steps_per_sec_ratio"`
	StepsGoalMet bool    `json:"steps_goal_met"`
	// The streams alone: p50 < 5 ms and p99 < 20 ms (the goal is for one
	// stream, --stream 1: unloaded).
	LatencyGoalMet bool   `json:"latency_goal_met"`
	Error          string `json:"error,omitempty"`
}

// streamOnce runs --stream and prints its report. A non-zero code is the
// exit code dexbench must stop with.
func streamOnce(ctx context.Context, o options) int {
	rep, err := runStream(ctx, o)
	if err != nil {
		rep.Error = err.Error()
	}
	return printReport(ctx, o, rep, err, "every dexd it started is stopped")
}

// runStream runs the bench without streams, then with them, each on a fresh
// cluster (in its own subdirectory of --dir, if given).
func runStream(ctx context.Context, o options) (*streamReport, error) {
	so := o.stream
	rep := &streamReport{Bench: "stream", Machine: thisMachine(), Config: streamConfig{Streams: so.n, Deltas: so.deltas, Rate: so.rate,
		DeltaBytes: len(deltaText(0)), Sessions: o.sessions, Workers: o.workers, Concurrency: o.concurrency,
		StreamConcurrency: (so.n + o.workers - 1) / o.workers, Nodes: 3, Partitions: max(o.partitions, 1)}}
	plain, with := o, o
	plain.stream, plain.dump = streamOptions{}, ""
	if o.dir != "" {
		plain.dir, with.dir = filepath.Join(o.dir, "without-streams"), filepath.Join(o.dir, "with-streams")
	}
	var err error
	if rep.Plain, err = run(ctx, plain); err != nil {
		return rep, fmt.Errorf("without streams: %w", err)
	}
	load := newStreamLoad(with)
	with.stream.load = load
	rep.Loaded, err = run(ctx, with)
	rep.Stream = &load.res
	if err != nil {
		return rep, fmt.Errorf("with streams: %w", err)
	}
	if rep.Plain.StepsPerSec > 0 {
		rep.StepsRatio = round2(rep.Loaded.StepsPerSec / rep.Plain.StepsPerSec)
	}
	rep.StepsGoalMet = rep.StepsRatio >= streamStepsGoal
	if a := load.res.Alone; a != nil {
		rep.LatencyGoalMet = a.Latency.N > 0 && a.Latency.P50 < streamP50GoalMs && a.Latency.P99 < streamP99GoalMs
	}
	return rep, nil
}
