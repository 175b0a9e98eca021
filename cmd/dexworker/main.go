// Command dexworker is a Dex Worker with a scripted, deterministic model and
// demo tools for every policy, used by the demo and the chaos suite. See
// README.md for the flags, the script format, holds and the ledger.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/api/client"
	"github.com/dexhq/dex/api/tlsconf"
	"github.com/dexhq/dex/api/tracing"
)

const usage = `usage: dexworker --addr TARGET --ledger FILE [flags]

A Dex Worker with a scripted model and demo tools: lookup (read), save_note
(idempotent write), send_email (single attempt), deploy (idempotent write,
needs approval), build (long running, polled), calc (inline: a script's
model output runs it inside RunModel). ask_user and sleep are built-ins of
the cluster.

TARGET is dex:///host1:port1,host2:port2,... (follows the lease holder by
gRPC health checking) or host:port of a load balancer.

--hold MOMENT[,MOMENT] pauses at: before-claim, after-claim, tool-running,
before-result, after-result-sent, during-poll, during-compaction, before-model. On a hold
the Worker writes "held MOMENT step=STEP pid=PID" to stderr and the file
FILE.held, then waits for SIGUSR1 or the file FILE.release (which it
removes). Each moment is held once unless --hold-all.

Every tool execution (and model call: tool "model" / "compact"; poll:
tool "build.poll") appends one fsynced JSON line to the ledger.

Each scripted model call reports a fixed usage (100 input and 20 output
tokens, cost 150 micro-units, model "dex-demo") unless its script output
gives "usage", so that budgets (dexctl session budget) can be tried.

A script (README.md) may write {{fill:N}} in a text, a call's arguments or
an error message for N bytes of filler; a demo tool called with
"result_bytes": N answers exactly N bytes.

A script's rate_limit error may give "retry_after_ms": N, reported as the
provider's Retry-After: the cluster holds the session's provider that long.

Flags:
`

type config struct {
	addr, ledger, script, hold, id string
	token                          string
	metricsAddr                    string
	holdAll                        bool
	stream                         bool
	concurrency                    int
	pollWait, grace, pollInterval  time.Duration
	modelRunTimeout                time.Duration
	toolRunTimeouts                map[string]time.Duration
	agents, toolAgents             []string
	tls                            tlsconf.Files
	tracing                        tracing.Options
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	var c config
	fs := flag.NewFlagSet("dexworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.addr, "addr", "", "cluster target: dex:///h1:p1,h2:p2,h3:p3 or host:port (required)")
	fs.StringVar(&c.ledger, "ledger", "", "side-effect ledger file, appended to (required)")
	fs.StringVar(&c.script, "script", "", "model script (JSON, see README.md); default: the demo model")
	fs.StringVar(&c.hold, "hold", "", "pause at these moments (comma separated) until released")
	fs.BoolVar(&c.holdAll, "hold-all", false, "hold every occurrence of a --hold moment, not only the first")
	fs.BoolVar(&c.stream, "stream", false, "stream each model output's text as live output while the call runs, 8 bytes every 10 ms, before answering (docs/design/streaming.md)")
	fs.StringVar(&c.id, "id", "", "Worker id (default dexworker-HOST-PID)")
	fs.StringVar(&c.token, "token", "", "ACL token secret (a worker token; default $DEX_TOKEN)")
	fs.IntVar(&c.concurrency, "concurrency", 4, "tasks run at once")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve the Worker's Prometheus metrics on HOST:PORT/metrics (default: none)")
	fs.DurationVar(&c.pollWait, "poll-wait", 20*time.Second, "long-poll wait")
	fs.DurationVar(&c.pollInterval, "poll-interval", 200*time.Millisecond, "how often the cluster polls a build task (the build tool's poll interval)")
	fs.DurationVar(&c.grace, "shutdown-grace", 5*time.Second, "on SIGTERM/SIGINT, how long running tasks may finish")
	fs.DurationVar(&c.modelRunTimeout, "model-run-timeout", 0, "how long one model call (RunModel, CompactContext) may run before the cluster cancels it (0: the cluster's --run-timeout)")
	agents := fs.String("agent", "", "NAME[,NAME]: the agents (NAME or NAME@VERSION) whose model this Worker runs; it gets only their sessions' model Steps (default: the default agent)")
	toolAgents := fs.String("tool-agents", "", "NAME[,NAME]: serve the demo tools only for these agents' sessions (default: for every agent)")
	runTimeouts := fs.String("tool-run-timeout", "", "TOOL=DURATION[,TOOL=DURATION]: how long one attempt of the tool may run before the cluster cancels it; part of the tool's policy (default: the cluster's --run-timeout)")
	registerTLS(fs, &c.tls)
	c.tracing.Register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := c.tls.Validate(); err != nil {
		return nil, err
	}
	if err := c.tracing.Check(); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c.addr == "" || c.ledger == "" {
		return nil, errors.New("--addr and --ledger are required")
	}
	if c.concurrency <= 0 {
		return nil, errors.New("--concurrency must be positive")
	}
	if c.pollInterval < time.Millisecond {
		return nil, errors.New("--poll-interval must be at least 1ms")
	}
	if c.modelRunTimeout < 0 || c.modelRunTimeout > maxRunTimeout {
		return nil, fmt.Errorf("--model-run-timeout must be between 0 (the cluster's default) and %s", maxRunTimeout)
	}
	c.agents, c.toolAgents = splitList(*agents), splitList(*toolAgents)
	var err error
	if c.toolRunTimeouts, err = parseRunTimeouts(*runTimeouts, (&demoTools{}).tools()); err != nil {
		return nil, err
	}
	return &c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexworker:", err)
		os.Exit(2)
	}
	os.Exit(run(c))
}

func run(c *config) int {
	log := newLogger(os.Stderr)
	defer func() { _ = log.Sync() }()

	moments, err := parseMoments(c.hold)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexworker:", err)
		return 2
	}
	var script *Script
	if c.script != "" {
		if script, err = LoadScript(c.script); err != nil {
			fmt.Fprintln(os.Stderr, "dexworker:", err)
			return 2
		}
	}
	ledger, err := OpenLedger(c.ledger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexworker:", err)
		return 1
	}
	defer ledger.Close()

	// SIGUSR1 releases a hold (and never kills the Worker).
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	id := c.id
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("dexworker-%s-%d", host, os.Getpid())
	}
	tlsOpts, stopReload, err := dialTLS(c.tls, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexworker:", err)
		return 2
	}
	defer stopReload()
	stopTracing, err := tracing.Start(ctx, "dexworker", c.tracing)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexworker:", err)
		return 2
	}
	defer func() {
		if err := stopTracing(); err != nil {
			log.Warn("traces not all exported at exit", zap.Error(err))
		}
	}()
	dialOpts := append(tlsOpts, client.WithToken(client.TokenFrom(c.token)))
	conn, err := client.Dial(c.addr, append(dialOpts, c.tracing.DialOptions()...)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexworker:", err)
		return 2
	}
	defer conn.Close()

	tools := &demoTools{ledger: ledger, worker: id, polls: map[string]int{}, pollInterval: c.pollInterval, runTimeouts: c.toolRunTimeouts}
	h := newHolder(moments, c.holdAll, c.ledger, usr1, os.Stderr)
	var wm *client.WorkerMetrics
	if c.metricsAddr != "" {
		wm = client.NewWorkerMetrics()
		stopMetrics, err := serveMetrics(c.metricsAddr, wm, log)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dexworker:", err)
			return 1
		}
		defer stopMetrics()
	}
	w, err := client.NewWorker(conn, client.WorkerOptions{
		ID:              id,
		Tools:           withAgents(tools.tools(), c.toolAgents),
		Agents:          c.agents,
		Model:           &Model{script: script, ledger: ledger, worker: id, inline: tools.inline, stream: c.stream, streamDelta: 8, streamEvery: 10 * time.Millisecond},
		ModelRunTimeout: c.modelRunTimeout,
		Concurrency:     c.concurrency,
		PollWait:        c.pollWait,
		ShutdownGrace:   c.grace,
		Logger:          log,
		Hold:            h.Hold,
		Metrics:         wm,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexworker:", err)
		return 2
	}
	log.Info("dexworker starting", zap.String("worker", id), zap.String("addr", c.addr),
		zap.String("ledger", c.ledger), zap.String("script", c.script), zap.String("hold", c.hold), zap.Int("pid", os.Getpid()))
	if err := w.Run(ctx); err != nil {
		log.Error("worker stopped", zap.Error(err))
		return 1
	}
	log.Info("dexworker stopped")
	return 0
}
