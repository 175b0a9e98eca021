// Command dexd runs one Dex cluster node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	// Every node carries the same zone database, so a schedule's cron
	// expression in a zone gives the same slots whichever node leads
	// (docs/schedules.md).
	_ "time/tzdata"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/metrics"
	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/api/tracing"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/gc"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "verify" {
		os.Exit(runVerify(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

// maxPartitions bounds --partitions: every node runs a raft group per
// partition.
const maxPartitions = 64

// usageError is a bad flag: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

type options struct {
	id, dataDir, raftAddr, grpcAddr, httpAddr string
	peers, join, logLevel                     string
	joinTimeout                               time.Duration
	heartbeat, election, stepDown             time.Duration
	snapshotThreshold                         uint64
	snapshotInterval                          time.Duration
	trailingLogs                              uint64
	maxPayload                                int
	workerHeartbeat, workerTimeout            time.Duration
	drainTimeout                              time.Duration
	eventCount                                uint64
	keepTurnSteps                             uint64
	bulkPace                                  time.Duration
	eventAge                                  time.Duration
	workerTTL, toolWait                       time.Duration
	sessionRetention                          time.Duration
	retention                                 time.Duration
	agentRetention                            agentRetention
	agentBudgets                              agentBudgets
	agentProviders                            agentProviders
	providerLimits                            providerLimits
	archiveURL                                string
	runTimeout                                time.Duration
	partitions                                int
	cpuProfile                                string
	parsedPeers                               []cluster.Peer
	tls                                       tlsOptions
	sec                                       security
	console                                   consoleOptions
	tracing                                   tracing.Options
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{agentRetention: agentRetention{}, agentBudgets: agentBudgets{}, agentProviders: agentProviders{}, providerLimits: providerLimits{}}
	fs := flag.NewFlagSet("dexd", flag.ContinueOnError)
	// The flag package prints every flag after a bad one; dexd prints one
	// line then, and the flags only when asked with -h.
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.id, "id", "", "this node's id (e.g. n1)")
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory (raft log, snapshots, node.json)")
	fs.StringVar(&o.raftAddr, "raft-addr", "", "raft address HOST:PORT (Dex's port: 7001)")
	fs.StringVar(&o.grpcAddr, "grpc-addr", "", "gRPC address HOST:PORT (Dex's port: 7101)")
	fs.StringVar(&o.httpAddr, "http-addr", "", "HTTP address HOST:PORT (Dex's port: 7201): /healthz, /readyz, /metrics, the console under /ui/")
	fs.StringVar(&o.peers, "peers", "", "bootstrap configuration n1=RAFTADDR,n2=RAFTADDR,… (ignored on an existing data dir)")
	fs.StringVar(&o.join, "join", "", "gRPC address of a member: join a running cluster instead of bootstrapping")
	fs.DurationVar(&o.joinTimeout, "join-timeout", 30*time.Second, "how long --join keeps trying")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&o.heartbeat, "raft-heartbeat-timeout", cluster.DefaultHeartbeatTimeout, "raft heartbeat timeout: followers notice a dead leader within 1-2x this; the leader heartbeats every tenth of it")
	fs.DurationVar(&o.election, "raft-election-timeout", cluster.DefaultElectionTimeout, "raft election timeout: how long a candidate waits for votes before it tries again")
	fs.DurationVar(&o.stepDown, "raft-leader-lease-timeout", cluster.DefaultStepDownTimeout, "raft leader lease timeout: a leader out of touch with a quorum this long steps down (at most the heartbeat timeout)")
	fs.Uint64Var(&o.snapshotThreshold, "raft-snapshot-threshold", 8192, "log entries between snapshots")
	fs.DurationVar(&o.snapshotInterval, "raft-snapshot-interval", cluster.DefaultSnapshotInterval, "how often to check whether the log grew by --raft-snapshot-threshold entries (a snapshot then)")
	fs.Uint64Var(&o.trailingLogs, "raft-trailing-logs", 10240, "log entries kept after a snapshot")
	fs.IntVar(&o.maxPayload, "max-payload", server.DefaultMaxPayload, "largest request in bytes; a larger one is refused with ResourceExhausted")
	fs.DurationVar(&o.workerHeartbeat, "heartbeat-interval", lease.DefaultHeartbeatInterval, "how often Workers heartbeat a task")
	fs.DurationVar(&o.workerTimeout, "heartbeat-timeout", lease.DefaultHeartbeatTimeout, "an attempt without a heartbeat for this long fails; a new leader's grace is this or, if longer, twice what a Worker needs to reach it (lease.TakeoverGrace)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM or SIGINT a leader stops handing out tasks and lets running attempts finish for up to this long, then hands leadership to another node")
	fs.Uint64Var(&o.eventCount, "event-retention-count", gc.DefaultEventCount, "events kept per session; older ones are dropped as new ones come (0: no limit)")
	fs.DurationVar(&o.eventAge, "event-retention-age", gc.DefaultEventAge, "events older than this are dropped by the leader (0: no limit)")
	fs.DurationVar(&o.bulkPace, "bulk-pace", 0, "the leader waits this long between two steps of a bulk job (each acts on at most 100 sessions), to bound the load a job puts on the cluster (0: no wait)")
	fs.Uint64Var(&o.keepTurnSteps, "keep-turn-steps", gc.DefaultKeepTurnSteps, "Steps (with their attempts) are kept for each session's last this many finished turns; the leader folds older turns' Steps into one record per turn (history is kept; 0: never fold)")
	fs.DurationVar(&o.workerTTL, "worker-ttl", lease.DefaultWorkerTTL, "a Worker that neither polls nor heartbeats for this long is deregistered; also a new leader's grace for every Worker")
	fs.DurationVar(&o.sessionRetention, "session-retention", 0, "sessions idle (no turn, empty inbox) for longer than this are deleted by the leader (0: kept for ever)")
	fs.DurationVar(&o.retention, "retention", 0, "closed sessions are deleted by the leader this long after they closed, unless created with a retention of their own (0: kept for ever)")
	fs.Var(o.agentBudgets, "agent-budget", "NAME/FIELD=N[,FIELD=N…]: the budget an agent's new sessions start with; FIELD is max_tokens, max_cost_micros, max_turns, max_model_calls_per_turn, max_tool_calls_per_turn or loop_limit (\"default\" names the default agent; repeatable; docs/budgets.md)")
	fs.Var(o.agentProviders, "agent-provider", "NAME=PROVIDER[,NAME=PROVIDER…]: the provider whose limits and Retry-After holds an agent's model calls count against (\"default\" names the default agent; repeatable; docs/flow-control.md)")
	fs.Var(o.providerLimits, "provider-limit", "PROVIDER/FIELD=N[,FIELD=N…]: a provider's limits, enforced by each partition's leader; FIELD is max_concurrent, calls_per_minute or tokens_per_minute (repeatable; docs/flow-control.md)")
	fs.Var(o.agentRetention, "agent-retention", "NAME=DURATION[,NAME=DURATION…]: the retention of an agent's closed sessions, over --retention (\"default\" names the default agent; repeatable)")
	fs.StringVar(&o.archiveURL, "archive-url", "", "write every session the retentions delete to this archive first, and delete only what it took: a directory (file:///DIR, or a bare absolute path) or a bucket (s3://BUCKET, gs://BUCKET, azblob://CONTAINER); an archive that cannot be opened stops dexd at start (default: no archive)")
	fs.DurationVar(&o.toolWait, "tool-wait", lease.DefaultToolWait, "a queued Step whose tool (or named agent's model) no live Worker serves for this long fails, as a call of an unknown tool does (0: it waits until a Worker comes, its waiting reason shown on the Step)")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile (pprof) of this node, from the moment its data dir is open until it stops, to this file; a relative path is under --data-dir")
	fs.DurationVar(&o.runTimeout, "run-timeout", lease.DefaultRunTimeout, "how long one attempt of a Step may run, heartbeating or not, when its tool or its Worker's model registered no run timeout; then it is cancelled and fails with error type timeout (0: no limit). Generous by default: it catches handlers that hang while heartbeating, and longer work belongs in a long-running tool")
	fs.IntVar(&o.partitions, "partitions", 0, "the cluster's number of partitions, each its own raft group with its own leader, fixed when the cluster is bootstrapped (0: what the data dir records, or 1 on a new one; docs/design/partitions.md)")
	o.tls.register(fs)
	o.sec.addFlags(fs)
	o.console.register(fs)
	o.tracing.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage of dexd (and dexd verify --data-dir DIR, which checks a stopped node's data dir):")
			fs.PrintDefaults()
			return nil, err
		}
		return nil, &usageError{err.Error() + " (run dexd -h for the flags)"}
	}
	if fs.NArg() > 0 {
		return nil, &usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	for _, req := range []struct{ name, v string }{
		{"--id", o.id}, {"--data-dir", o.dataDir}, {"--raft-addr", o.raftAddr},
		{"--grpc-addr", o.grpcAddr}, {"--http-addr", o.httpAddr},
	} {
		if req.v == "" {
			return nil, &usageError{req.name + " is required"}
		}
	}
	for _, a := range []struct{ name, v string }{
		{"--raft-addr", o.raftAddr}, {"--grpc-addr", o.grpcAddr}, {"--http-addr", o.httpAddr},
	} {
		if err := cluster.ValidateAddr(a.v); err != nil {
			return nil, &usageError{fmt.Sprintf("%s: %v", a.name, err)}
		}
	}
	if o.raftAddr == o.grpcAddr || o.raftAddr == o.httpAddr || o.grpcAddr == o.httpAddr {
		return nil, &usageError{"--raft-addr, --grpc-addr and --http-addr must differ"}
	}
	if o.join != "" {
		if err := cluster.ValidateAddr(o.join); err != nil {
			return nil, &usageError{fmt.Sprintf("--join: %v", err)}
		}
	}
	if o.peers == "" && o.join == "" && !cluster.HasIdentity(o.dataDir) {
		return nil, &usageError{"--peers is required on a new data dir (or --join to join a running cluster)"}
	}
	if o.peers != "" {
		peers, err := cluster.ParsePeers(o.peers)
		if err != nil {
			return nil, &usageError{err.Error()}
		}
		o.parsedPeers = peers
		if o.join == "" {
			var self *cluster.Peer
			for i := range peers {
				if peers[i].ID == o.id {
					self = &peers[i]
				}
			}
			if self == nil {
				return nil, &usageError{fmt.Sprintf("--id %s is not in --peers", o.id)}
			}
			if self.RaftAddr != o.raftAddr {
				return nil, &usageError{fmt.Sprintf("--peers gives %s the raft address %s but --raft-addr is %s", o.id, self.RaftAddr, o.raftAddr)}
			}
		}
	}
	if err := o.tls.validate(); err != nil {
		return nil, err
	}
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return nil, &usageError{fmt.Sprintf("--log-level %q: use debug, info, warn or error", o.logLevel)}
	}
	if o.heartbeat <= 0 || o.election <= 0 || o.stepDown <= 0 {
		return nil, &usageError{"raft timeouts must be positive"}
	}
	if o.workerTTL <= 0 {
		return nil, &usageError{"--worker-ttl must be positive"}
	}
	if err := o.tracing.Check(); err != nil {
		return nil, &usageError{err.Error()}
	}
	if o.toolWait < 0 {
		return nil, &usageError{"--tool-wait must not be negative (0: queued Steps wait until a Worker comes)"}
	}
	if o.drainTimeout < 0 {
		return nil, &usageError{"--drain-timeout must not be negative"}
	}
	if o.eventAge < 0 {
		return nil, &usageError{"--event-retention-age must not be negative"}
	}
	if o.sessionRetention < 0 {
		return nil, &usageError{"--session-retention must not be negative"}
	}
	if o.retention < 0 {
		return nil, &usageError{"--retention must not be negative (0: closed sessions are kept for ever)"}
	}
	if o.retention.Milliseconds() > fsm.MaxRetentionMs {
		return nil, &usageError{"--retention is at most 100 years"}
	}
	for name, d := range o.agentRetention {
		if d.Milliseconds() > fsm.MaxRetentionMs {
			return nil, &usageError{fmt.Sprintf("--agent-retention: agent %s: at most 100 years", agentLabel(name))}
		}
	}
	if o.partitions < 0 || o.partitions > maxPartitions {
		return nil, &usageError{fmt.Sprintf("--partitions %d: use 1 to %d (0: what the data dir records)", o.partitions, maxPartitions)}
	}
	if o.partitions == 0 {
		o.partitions = max(cluster.RecordedPartitions(o.dataDir), 1)
	}
	if o.runTimeout < 0 || o.runTimeout > lease.MaxRunTimeout {
		return nil, &usageError{fmt.Sprintf("--run-timeout must be between 0 (no limit) and %s", lease.MaxRunTimeout)}
	}
	o.sec.tlsConfigured = o.tls.files.Enabled()
	if err := o.sec.check(fs, o); err != nil {
		return nil, err
	}
	return o, nil
}

func newLogger(level string) *zap.Logger {
	var lv zapcore.Level
	_ = lv.UnmarshalText([]byte(level))
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(os.Stderr), lv)
	return zap.New(core)
}

func run(args []string, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(stderr, "dexd: %s\n", msg)
		}
		return 2
	}
	var store *archive.Store
	if o.archiveURL != "" {
		if store, err = openArchive(o.archiveURL); err != nil {
			fmt.Fprintf(stderr, "dexd: %s\n", err)
			return 2
		}
		defer store.Close()
	}
	log := newLogger(o.logLevel).With(zap.String("node", o.id))
	defer log.Sync()
	stopTracing, err := tracing.Start(context.Background(), "dexd", o.tracing)
	if err != nil {
		fmt.Fprintf(stderr, "dexd: %s\n", err)
		return 2
	}
	defer func() {
		if err := stopTracing(); err != nil {
			log.Warn("traces not all exported at exit", zap.Error(err))
		}
	}()
	if err := serve(o, store, log); err != nil {
		fmt.Fprintf(stderr, "dexd: %s\n", oneLine(err.Error()))
		return 1
	}
	return 0
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// serve runs the node; store is the archive of --archive-url (nil: none).
func serve(o *options, store *archive.Store, log *zap.Logger) error {
	// Ports first: a busy port fails before the data dir is touched.
	grpcLis, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		return fmt.Errorf("listen on --grpc-addr %s: %v", o.grpcAddr, err)
	}
	defer grpcLis.Close()
	httpLis, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return fmt.Errorf("listen on --http-addr %s: %v", o.httpAddr, err)
	}
	defer httpLis.Close()
	tlsStore, stopReload, err := loadTLS(o.tls, log)
	if err != nil {
		return err
	}
	defer stopReload()

	raftSink, err := metrics.RaftSink() // before raft starts, so it sees every metric
	if err != nil {
		return fmt.Errorf("raft metrics: %v", err)
	}
	cfg := cluster.Config{
		ID:                o.id,
		DataDir:           o.dataDir,
		RaftAddr:          o.raftAddr,
		GRPCAddr:          o.grpcAddr,
		HTTPAddr:          o.httpAddr,
		Peers:             o.parsedPeers,
		Join:              o.join,
		Partitions:        o.partitions,
		Logger:            log,
		TLS:               tlsStore,
		HeartbeatTimeout:  o.heartbeat,
		ElectionTimeout:   o.election,
		StepDownTimeout:   o.stepDown,
		SnapshotThreshold: o.snapshotThreshold,
		SnapshotInterval:  o.snapshotInterval,
		TrailingLogs:      o.trailingLogs,
		PeerDialOptions:   o.sec.peerDialOptions(),
		OnHalt: func(err error) {
			// Applying later entries would diverge from the peers: stop now.
			log.Error("stopping: the state machine cannot apply a committed entry", zap.Error(err))
			log.Sync()
			os.Exit(1)
		},
		OnDiskFull: func(err error) {
			// The raft log or raft.db cannot be written: stop, naming the disk.
			log.Sync()
			fmt.Fprintf(os.Stderr, "dexd: stopping: %s\n", oneLine(err.Error()))
			os.Exit(1)
		},
		OnDamage: func(err error) {
			// A log entry failed its checksum: serve and vote on nothing more.
			log.Sync()
			fmt.Fprintf(os.Stderr, "dexd: %s\n", oneLine(err.Error()))
			os.Exit(1)
		},
	}
	archiveMetrics := metrics.NewArchive()
	if store != nil {
		log.Info("sessions the retentions delete are archived first", zap.String("archive", store.URL()))
	}
	grpcMetrics := metrics.NewGRPC()

	// One leader stack per partition, each built on its raft group before
	// raft starts; a cluster of one partition is one Node, as it always was.
	var (
		host   *cluster.Host
		node   *cluster.Node
		stacks []*leaderStack
	)
	if o.partitions > 1 {
		if host, err = cluster.NewHost(cfg); err != nil {
			return err
		}
		for _, n := range host.Nodes() {
			stacks = append(stacks, newLeaderStack(n, o, store, archiveMetrics, log))
		}
		err = host.Start(func(k int) cluster.Hooks { return stacks[k].hooks() })
		node = host.Partition(0)
	} else {
		if node, err = cluster.New(cfg); err != nil {
			return err
		}
		stacks = append(stacks, newLeaderStack(node, o, store, archiveMetrics, log))
		err = node.Start(stacks[0].hooks())
	}
	if err != nil {
		return err
	}
	shutdownRaft := node.Shutdown
	if host != nil {
		shutdownRaft = host.Shutdown
	}
	if o.cpuProfile != "" {
		// After Open: a profile in a new data dir would make it look foreign.
		stopProfile, err := startCPUProfile(o.cpuProfile, o.dataDir)
		if err != nil {
			_ = shutdownRaft()
			return err
		}
		defer stopProfile()
	}
	log.Info("node started", zap.String("raft_addr", o.raftAddr), zap.String("grpc_addr", o.grpcAddr), zap.String("http_addr", o.httpAddr), zap.Int("partitions", max(o.partitions, 1)))

	shared := func(so server.Options) server.Options {
		so.TLS, so.ACL, so.NodeToken = tlsStore, o.sec.acl, o.sec.token
		so.ServerOptions = append(grpcMetrics.ServerOptions(), o.tracing.ServerOptions()...)
		return so
	}
	// Every node serves every call: here when it leads the call's
	// partition, else forwarded to the node that does.
	nodes := []*cluster.Node{node}
	if host != nil {
		nodes = host.Nodes()
	}
	opts := make([]server.Options, len(stacks))
	for k, st := range stacks {
		opts[k] = shared(st.serverOptions(o))
	}
	srv := server.NewRouter(nodes, log, opts)
	ready := nodeReadiness{router: srv, nodes: nodes}
	grpcMetrics.Initialize(srv.ServiceInfo())
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(grpcLis) }()
	collectors := append([]prometheus.Collector{grpcMetrics.Collector(), raftSink}, archiveMetrics.Collectors()...)
	var parts []partitionMetrics
	for k, st := range stacks {
		pc := append(st.nm.Collectors(), workerHealthCollector{health: st.disp.WorkerHealth}, unhealthyWorkersCollector{st.disp})
		pc = append(pc, forwardedCollector(srv, k))
		parts = append(parts, partitionMetrics{node: st.node, collectors: pc})
	}
	ui, closeUI := newConsole(node, o, tlsStore)
	defer closeUI()
	hsrv := newHTTPServer(o.sec.guardMetrics(node.State, withConsole(httpHandler(ready, parts, collectors...), ui)))
	bootCtx, stopBoot := context.WithCancel(context.Background())
	defer stopBoot()
	o.sec.gateReadiness(node)
	go o.sec.bootstrapFromFile(bootCtx, node, log)
	go func() {
		if err := hsrv.Serve(httpListener(httpLis, tlsStore, o.tls.httpTLS)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()

	// stop hands leadership over while the servers still answer (so callers
	// hear Unavailable and move on to the new leader), then stops them and
	// raft. The leader services are stopped first: nothing of them proposes
	// after the handover.
	stop := func() {
		for _, st := range stacks {
			if err := st.node.Handover(); err != nil {
				log.Warn("handing leadership over failed; the other nodes elect a leader after their election timeout", zap.Int("partition", st.node.Partition()), zap.Error(err))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hsrv.Shutdown(ctx)
		srv.Stop(5 * time.Second)
		if err := shutdownRaft(); err != nil {
			log.Warn("raft shutdown", zap.Error(err))
		}
	}

	sigCh := make(chan os.Signal, 1)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigCh)

	if node.NeedsJoin() {
		ctx, cancel := context.WithTimeout(context.Background(), o.joinTimeout)
		joined := make(chan error, 1)
		go func() { joined <- node.Join(ctx, o.join) }()
		select {
		case err := <-joined:
			cancel()
			if err != nil {
				stop()
				return err
			}
		case sig := <-sigCh:
			cancel()
			log.Info("signal received; shutting down", zap.String("signal", sig.String()))
			stop()
			return nil
		}
	}

	select {
	case sig := <-sigCh:
		log.Info("signal received; shutting down", zap.String("signal", sig.String()))
		drainAll(stacks, o.drainTimeout, sigCh, log)
		stop()
		log.Info("stopped")
		return nil
	case err := <-serveErr:
		stop()
		return fmt.Errorf("server stopped: %v", err)
	}
}
