// Package soak runs the soak: a seeded random fault schedule under mixed
// load on a real cluster (started through chaos/harness), then the history
// checker that judges the run (linearizability of the clients' history,
// the Workers' ledger, restarts and backups) and the report.
package soak

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/cluster"
)

// The soak: 3 dexd, a few dexworkers and several clients under a steady
// mixed load while faults drawn from the seed strike at random moments;
// then every fault is healed, the cluster quiesces and the checker judges
// what happened (check.go).

// Options configure a soak.
type Options struct {
	BinDir   string // holds dexd and dexworker (a chaos build of dexd in BinDir/chaos is used when present)
	Out      string // the report, the history and the kept logs
	TmpDir   string
	Duration time.Duration
	Seed     uint64
	Clients  int // default 4
	Workers  int // default 3
	Progress io.Writer
	// Kinds to draw from (default: NodeFaults, plus NetFaults and
	// FailpointFaults with the chaos build of dexd).
	Kinds []string
	// MaxPayload is the nodes' --max-payload (default dexd's).
	MaxPayload int
	// Big adds the load of sessions at the payload limits (big.go).
	Big bool
	// Retention turns on the lifecycle mode (lifecycle.go): the nodes
	// delete closed sessions this long after they close, and the clients
	// close sessions throughout. Archive adds an archive directory the
	// nodes write every session to before they delete it.
	Retention time.Duration
	Archive   bool
	// SampleEvery: how often the lifecycle mode samples the flatness
	// figures (default a minute); Flat judges them (default
	// DefaultFlatRule).
	SampleEvery time.Duration
	Flat        FlatRule
	// RestoreTimer times the restore of the leader's newest snapshot for
	// the flatness figures (default: RestoreNewest in this process).
	RestoreTimer RestoreTimer
	// Partitions runs the cluster with dexd --partitions N (0 or 1: one
	// raft group, as without it; partitions.go says what changes).
	Partitions int
}

// FaultRecord is one fault as it happened.
type FaultRecord struct {
	Fault
	At   time.Duration `json:"at_ns"`
	What string        `json:"what"`
	Err  string        `json:"err,omitempty"`
}

// Report is the outcome of a soak.
type Report struct {
	Seed       uint64         `json:"seed"`
	Duration   time.Duration  `json:"duration_ns"`
	Wall       time.Duration  `json:"wall_ns"`
	Kinds      []string       `json:"kinds"`
	Ops        map[string]int `json:"ops"`     // kind → count
	Answers    map[string]int `json:"answers"` // kind answer → count
	OpsTotal   int            `json:"ops_total"`
	Faults     map[string]int `json:"faults"`
	FaultLog   []FaultRecord  `json:"fault_log"`
	Sessions   int            `json:"sessions"`
	Executions int            `json:"executions"`
	Check      CheckResult    `json:"check"`
	Logs       string         `json:"logs,omitempty"`
	Err        string         `json:"error,omitempty"`
	// Big: the run had the load of sessions at the payload limits.
	Big bool `json:"big,omitempty"`
	// Restart and Backups: the checks after the soak, as the checker
	// judged them.
	Restart *RestartCheck `json:"restart,omitempty"`
	Backups []BackupCheck `json:"backups,omitempty"`
	// Lifecycle: the lifecycle mode's settings and flatness figures.
	Lifecycle *LifecycleReport `json:"lifecycle,omitempty"`
	// Partitions: the cluster's number of partitions, when several.
	Partitions int `json:"partitions,omitempty"`
}

// LifecycleReport is the lifecycle mode's part of the report.
type LifecycleReport struct {
	Retention   time.Duration `json:"retention_ns"`
	Archive     bool          `json:"archive"`
	Flat        []FlatSample  `json:"flat"`
	FlatVerdict FlatVerdict   `json:"flat_verdict"`
}

type soaker struct {
	o       Options
	dir     string
	cluster *harness.Cluster
	net     Net
	conn    *grpc.ClientConn
	cl      *client.Client
	svc     dexv1.SessionServiceClient
	admin   dexv1.AdminServiceClient
	rec     *Recorder
	ledger  string
	script  string

	wmu     sync.Mutex
	workers []*harness.Worker
	starts  int
	// links: one proxy set per Worker slot, cut by disconnect-worker.
	links []*harness.WorkerLink
	// gofail: node id → its failpoint endpoint (chaos build only).
	gofail map[string]string

	smu      sync.Mutex
	sessions []string

	// backups taken during the run (backup.go); only the schedule's
	// goroutine and then the end of the soak touch it.
	backups []BackupCheck

	// The lifecycle mode: the sessions seen closed and the flatness
	// samples (under smu), the clients (to follow their closing sessions
	// to the end) and the archive directory.
	closed     map[string]*ClosedSession
	flat       []FlatSample
	clients    []*loadClient
	archiveDir string
	finalAt    time.Duration
}

func (s *soaker) addSession(id string) {
	s.smu.Lock()
	s.sessions = append(s.sessions, id)
	s.smu.Unlock()
}

// Run runs the soak and its check. Everything it starts is stopped by
// PID when it returns. The error is a failure of the harness itself (the
// cluster never came up); violations are in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Clients <= 0 {
		o.Clients = 4
	}
	if o.Workers <= 0 {
		o.Workers = 3
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = server.DefaultMaxPayload
	}
	if o.RestoreTimer == nil {
		o.RestoreTimer = inProcess
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = time.Minute
	}
	if o.Flat == (FlatRule{}) {
		o.Flat = DefaultFlatRule
	}
	dir, err := os.MkdirTemp(o.TmpDir, "dex-soak-")
	if err != nil {
		return nil, err
	}
	s := &soaker{o: o, dir: dir, rec: NewRecorder(), ledger: filepath.Join(dir, "ledger.jsonl"), script: filepath.Join(dir, "script.json")}
	rep := &Report{Seed: o.Seed, Duration: o.Duration, Big: o.Big, Ops: map[string]int{}, Answers: map[string]int{}, Faults: map[string]int{}}
	if o.Partitions > 1 {
		rep.Partitions = o.Partitions
	}
	if o.Retention > 0 {
		rep.Lifecycle = &LifecycleReport{Retention: o.Retention, Archive: o.Archive}
		if o.Archive {
			s.archiveDir = filepath.Join(dir, "archive")
		}
	}
	start := time.Now()
	defer s.stopAll()
	if err := s.setUp(ctx); err != nil {
		rep.Err = err.Error()
		rep.Logs = s.keepLogs(o.Out)
		return rep, err
	}
	rep.Kinds = o.Kinds
	for _, k := range rep.Kinds {
		if s.net == nil && slices.Contains(NetFaults, k) || len(s.gofail) == 0 && slices.Contains(FailpointFaults, k) {
			err := fmt.Errorf("fault kind %s needs the network fault layer and the chaos build of dexd", k)
			rep.Err = err.Error()
			return rep, err
		}
	}
	if len(rep.Kinds) == 0 {
		rep.Kinds = append([]string(nil), NodeFaults...)
		if s.net != nil {
			rep.Kinds = append(rep.Kinds, NetFaults...)
		}
		if len(s.gofail) > 0 {
			rep.Kinds = append(rep.Kinds, FailpointFaults...)
		}
	}
	schedule := NewSchedule(o.Seed, rep.Kinds).OverPartitions(s.partitions())
	fmt.Fprintf(o.Progress, "soak: seed %d, %s, faults of %d kinds (%s), %d clients, %d Workers, dir %s\n",
		o.Seed, o.Duration, len(rep.Kinds), strings.Join(rep.Kinds, " "), o.Clients, o.Workers, dir)
	if s.partitions() > 1 {
		fmt.Fprintf(o.Progress, "soak: %d partitions; each leader fault strikes the leader of one, drawn from the seed\n", s.partitions())
	}
	if o.Big {
		fmt.Fprintf(o.Progress, "soak: --big: %s\n", bigSizesFor(o.MaxPayload))
	}
	if o.Retention > 0 {
		fmt.Fprintf(o.Progress, "soak: lifecycle: sessions closed throughout, retention %s, archive %s\n", o.Retention, orDash(s.archiveDir))
	}

	loadCtx, stopLoad := context.WithTimeout(ctx, o.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	for i := 0; i < o.Clients; i++ {
		c := &loadClient{s: s, id: i, r: rand.New(rand.NewPCG(o.Seed, uint64(i+1)))}
		s.clients = append(s.clients, c)
		wg.Add(1)
		go func() { defer wg.Done(); c.run(loadCtx) }()
	}
	if o.Big {
		b := newBigClient(s, o.Clients+1)
		wg.Add(1)
		go func() { defer wg.Done(); b.run(loadCtx, start) }()
	}
	progressDone := make(chan struct{})
	go s.progress(loadCtx, start, rep, progressDone)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		if s.lifecycle() {
			s.sampleEveryMinute(loadCtx, start, o.SampleEvery)
		}
	}()
	s.runSchedule(loadCtx, start, schedule, rep)
	<-loadCtx.Done()
	wg.Wait()
	<-progressDone
	<-samplerDone
	if s.lifecycle() {
		sm := s.sampleFlat(ctx, time.Since(start))
		s.addFlat(sm)
		fmt.Fprintf(o.Progress, "soak: end flatness: %s\n", sm.line())
	}

	fmt.Fprintf(o.Progress, "soak: load over after %s; healing and quiescing\n", time.Since(start).Round(time.Second))
	in, err := s.finish(ctx, start)
	if err != nil {
		rep.Err = err.Error()
	}
	fmt.Fprintf(o.Progress, "soak: restarting every node on its data dir, then restoring %d backups into scratch clusters\n", len(s.backups))
	in.Restart = s.restartCheck(ctx, in, err)
	in.Backups = s.checkBackups(ctx)
	rep.Restart, rep.Backups = in.Restart, in.Backups
	in.Ops = s.rec.Ops()
	in.Out = o.Out
	in.Partitions = rep.Partitions
	if s.lifecycle() {
		s.lifecycleInput(ctx, &in)
		rep.Lifecycle.Flat = s.flat
		rep.Lifecycle.FlatVerdict = JudgeFlat(s.flat, o.Duration, o.Flat)
	}
	for _, op := range in.Ops {
		rep.Ops[op.Kind]++
		rep.Answers[op.Kind+" "+op.Answer]++
	}
	rep.OpsTotal = len(in.Ops)
	rep.Sessions = len(in.Final)
	rep.Executions = len(in.Ledger)
	fmt.Fprintf(o.Progress, "soak: checking %d operations, %d ledger lines, %d sessions\n", len(in.Ops), len(in.Ledger), len(in.Final))
	if rep.Err == "" {
		rep.Check = Check(in)
	} else {
		rep.Check = CheckRecovery(in)
		rep.Check.Violations = append(rep.Check.Violations, Violation{Kind: VCheckIncomplete, Detail: "the end of the soak failed: " + rep.Err})
	}
	rep.Wall = time.Since(start)
	if o.Out != "" {
		_ = os.MkdirAll(o.Out, 0o755)
		_ = WriteHistory(filepath.Join(o.Out, "history.jsonl"), in.Ops)
	}
	if len(rep.Check.Violations) > 0 {
		s.stopAll()
		rep.Logs = s.keepLogs(o.Out)
	} else {
		s.stopAll()
		_ = os.RemoveAll(dir)
	}
	return rep, nil
}

func (s *soaker) setUp(ctx context.Context) error {
	script := soakScript
	if s.o.Big {
		var err error
		if script, err = bigScript(bigSizesFor(s.o.MaxPayload)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(s.script, []byte(script), 0o644); err != nil {
		return err
	}
	bin := s.o.BinDir
	chaosDir, chaosErr := harness.ChaosDexd(s.o.BinDir)
	if chaosErr == nil {
		bin = chaosDir
	}
	copts := harness.ClusterOptions{BinDir: bin, Dir: s.dir, Args: s.nodeArgs(), Partitions: s.o.Partitions}
	var netOf func(*harness.Cluster) Net
	if soakNetwork != nil && chaosErr == nil { // only the chaos build follows the proxies' routes
		netOf = soakNetwork(&copts)
	}
	c, err := harness.NewCluster(copts)
	if err != nil {
		return err
	}
	s.cluster = c
	if netOf != nil {
		s.net = netOf(c)
	}
	if chaosErr == nil {
		s.gofail = map[string]string{}
		for _, n := range c.Nodes {
			addr, err := harness.FreeAddr()
			if err != nil {
				return err
			}
			if err := harness.SetFailpoints(n, "", addr); err != nil {
				return err
			}
			s.gofail[n.ID] = addr
		}
	}
	if err := c.Start(); err != nil {
		return err
	}
	if _, err := s.leader(ctx); err != nil {
		return err
	}
	if s.conn, err = client.Dial(c.Target(), c.DialOptions()...); err != nil {
		return err
	}
	s.cl, s.svc, s.admin = client.New(s.conn), dexv1.NewSessionServiceClient(s.conn), dexv1.NewAdminServiceClient(s.conn)
	for i := 0; i < s.o.Workers; i++ {
		link, err := harness.NewWorkerLink(c)
		if err != nil {
			return err
		}
		s.links = append(s.links, link)
		s.workers = append(s.workers, nil)
		if err := s.startWorker(i); err != nil {
			return err
		}
	}
	return nil
}

// soakSnapshotArgs make every node snapshot often, so that each restart,
// during the soak and after it, starts from a snapshot and not from the
// whole log, and a lagging follower is sent one.
var soakSnapshotArgs = []string{"--raft-snapshot-threshold", "1024", "--raft-snapshot-interval", "5s", "--raft-trailing-logs", "1024"}

// scratchArgs are the flags of the soak's scratch clusters. The checker
// reads every Step of every session, so no turn is folded
// (--keep-turn-steps 0).
func (s *soaker) scratchArgs() []string {
	args := append(append([]string{}, harness.ClusterArgs...), soakSnapshotArgs...)
	return append(args, "--max-payload", strconv.Itoa(s.o.MaxPayload), "--keep-turn-steps", "0")
}

// nodeArgs are the flags of the soak's nodes: the scratch clusters' and,
// in the lifecycle mode, the retention and the archive (a scratch cluster
// keeps what a backup holds, so its sessions can be compared).
func (s *soaker) nodeArgs() []string {
	args := s.scratchArgs()
	if s.o.Retention > 0 {
		args = append(args, "--retention", s.o.Retention.String())
	}
	if s.archiveDir != "" {
		args = append(args, "--archive-url", "file://"+s.archiveDir)
	}
	return args
}

// startWorker starts Worker slot i as a new process with a new id, so an
// execution names the process that ran it.
func (s *soaker) startWorker(i int) error {
	s.wmu.Lock()
	s.starts++
	name := fmt.Sprintf("w%d-%d", i+1, s.starts)
	w := harness.NewWorker(harness.WorkerOptions{BinDir: s.o.BinDir, Dir: s.dir, Name: name, Target: s.links[i].Target(), Ledger: s.ledger, Script: s.script, TLS: s.cluster.TLS()})
	s.workers[i] = w
	s.wmu.Unlock()
	return w.Start()
}

func (s *soaker) runSchedule(ctx context.Context, start time.Time, schedule *Schedule, rep *Report) {
	for ctx.Err() == nil {
		f := schedule.Next()
		s.backupDue(ctx, start)
		if sleepCtx(ctx, f.Gap) != nil {
			return
		}
		at := time.Since(start)
		what, err := s.inject(ctx, f)
		rec := FaultRecord{Fault: f, At: at, What: what}
		if err != nil && ctx.Err() == nil {
			rec.Err = err.Error()
		}
		if ctx.Err() != nil && what == "" {
			return
		}
		rep.FaultLog = append(rep.FaultLog, rec)
		rep.Faults[f.Kind]++
		line := fmt.Sprintf("soak: %s fault %d %s: %s", at.Round(time.Second), f.N, f.Kind, what)
		if rec.Err != "" {
			line += " (error: " + rec.Err + ")"
		}
		fmt.Fprintln(s.o.Progress, line)
		// Recovered before the next fault's gap starts.
		_, _ = s.leader(ctx)
	}
}

func (s *soaker) progress(ctx context.Context, start time.Time, rep *Report, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ops := s.rec.Ops()
		ok := 0
		for _, op := range ops {
			if op.Answer == AnsOK {
				ok++
			}
		}
		s.smu.Lock()
		n := len(s.sessions)
		s.smu.Unlock()
		fmt.Fprintf(s.o.Progress, "soak: %s/%s %d operations (%d ok), %d sessions\n", time.Since(start).Round(time.Second), s.o.Duration, len(ops), ok, n)
	}
}

// healAll ends every fault: network cuts healed, stopped processes woken,
// dead nodes and Workers started again.
func (s *soaker) healAll(ctx context.Context) error {
	if s.net != nil {
		s.net.Heal()
	}
	for _, l := range s.links {
		l.Heal()
	}
	for _, n := range s.cluster.Nodes {
		if n.Running() {
			_ = n.Signal(syscall.SIGCONT)
		} else if err := n.Start(); err != nil {
			return err
		}
	}
	for i, w := range s.workers {
		if w.Running() {
			_ = w.Signal(syscall.SIGCONT)
		} else if err := s.startWorker(i); err != nil {
			return err
		}
	}
	if _, err := s.leader(ctx); err != nil {
		return err
	}
	return s.everyNodeServes(ctx)
}

// everyNodeServes waits until every node answers; a node whose process
// ended on its own is named with the end of its log.
func (s *soaker) everyNodeServes(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := s.appliedIndexes(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v%s", err, s.deadNodes())
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// deadNodes describes the nodes whose process is not running: how it
// ended and the last lines it wrote.
func (s *soaker) deadNodes() string {
	var b strings.Builder
	for _, n := range s.cluster.Nodes {
		if !n.Running() {
			fmt.Fprintf(&b, "\n%s is not running (%v); its log ends:\n%s", n.ID, n.ExitErr(), harness.Tail(n.Log(), 8))
		}
	}
	return b.String()
}

// quiesceWait bounds the wait for every session to come to rest.
const quiesceWait = 3 * time.Minute

// finish heals, lets every session come to rest (answering what waits for
// a client), reads the final state, takes the last backup, stops the
// Workers and the nodes and rebuilds every node's state from its store at
// one index.
func (s *soaker) finish(ctx context.Context, start time.Time) (CheckInput, error) {
	var in CheckInput
	if err := s.healAll(ctx); err != nil {
		return in, fmt.Errorf("heal: %w", err)
	}
	drain := &loadClient{s: s, id: s.o.Clients, r: rand.New(rand.NewPCG(s.o.Seed, 0))}
	s.smu.Lock()
	ids := append([]string(nil), s.sessions...)
	s.smu.Unlock()
	deadline := time.Now().Add(quiesceWait)
	for {
		busy := 0
		for _, id := range ids {
			r, err := s.get(ctx, id)
			if err != nil {
				busy++
				continue
			}
			if r == nil {
				continue // never created
			}
			switch r.Session.Status {
			case dexv1.SessionStatus_SESSION_STATUS_RUNNING:
				busy++
			case dexv1.SessionStatus_SESSION_STATUS_WAITING:
				busy++
				if !drain.read(ctx, id, true) {
					drain.resolveWaiting(id, r.Steps) // too large for one page
				}
			}
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(s.o.Progress, "soak: %d sessions still busy after %s; checking as they are\n", busy, quiesceWait)
			break
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return in, err
		}
	}
	if s.lifecycle() {
		s.followClosingToTheEnd(ctx)
	}
	in.Final = map[string]*dexv1.GetSessionResponse{}
	for _, id := range ids {
		r, err := s.get(ctx, id)
		if err != nil {
			return in, fmt.Errorf("final read of %s: %w", id, err)
		}
		if r != nil {
			in.Final[id] = r
		}
	}
	s.finalAt = time.Since(s.rec.start)
	s.takeFinalBackup(ctx, start)
	for _, w := range s.workers {
		_ = w.Stop(10 * time.Second)
	}
	var err error
	if in.Ledger, err = harness.ReadLedger(s.ledger); err != nil {
		return in, err
	}
	if s.partitions() > 1 {
		in.PartitionDigests, err = s.partitionDigests(ctx)
	} else {
		in.Digests, in.DigestIndex, err = s.digests(ctx)
	}
	if err != nil {
		in.DigestErr = err.Error()
	}
	return in, nil
}

// get reads a whole session; nil when it does not exist.
func (s *soaker) get(ctx context.Context, id string) (*dexv1.GetSessionResponse, error) {
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := s.cl.GetSession(gctx, id)
	if isNotFound(err) {
		return nil, nil
	}
	return r, err
}

// digests waits until every node applied the same index, stops the nodes
// and rebuilds each one's state at that index from its store.
func (s *soaker) digests(ctx context.Context) (map[string]string, uint64, error) {
	var index uint64
	deadline := time.Now().Add(time.Minute)
	for {
		idx, err := s.appliedIndexes(ctx)
		if err == nil {
			lo, hi := idx[0], idx[0]
			for _, i := range idx {
				lo, hi = min(lo, i), max(hi, i)
			}
			if lo == hi {
				index = lo
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("the nodes' applied indexes never met: %v (%v)%s", idx, err, s.deadNodes())
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, 0, err
		}
	}
	s.cluster.StopAll()
	out := map[string]string{}
	for _, n := range s.cluster.Nodes {
		d, err := cluster.StateDigest(n.DataDir, index)
		if err != nil {
			return nil, index, fmt.Errorf("node %s: %w", n.ID, err)
		}
		out[n.ID] = d
	}
	return out, index, nil
}

func (s *soaker) appliedIndexes(ctx context.Context) ([]uint64, error) {
	var out []uint64
	for _, n := range s.cluster.Nodes {
		applied, err := s.appliedIndex(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.ID, err)
		}
		out = append(out, applied)
	}
	return out, nil
}

func (s *soaker) stopAll() {
	s.wmu.Lock()
	ws := append([]*harness.Worker(nil), s.workers...)
	s.wmu.Unlock()
	for _, w := range ws {
		if w != nil {
			_ = w.Stop(5 * time.Second)
		}
	}
	if s.cluster != nil {
		s.cluster.StopAll()
	}
	for _, l := range s.links {
		l.Close()
	}
	s.links = nil
	if c, ok := s.net.(interface{ Close() }); ok {
		c.Close()
		s.net = nil
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// keepLogs copies the nodes' and Workers' logs, the ledger and the script
// to out/logs and returns that directory.
func (s *soaker) keepLogs(out string) string {
	if out == "" {
		return s.dir
	}
	dst := filepath.Join(out, "logs")
	_ = os.MkdirAll(dst, 0o755)
	matches, _ := filepath.Glob(filepath.Join(s.dir, "*.log"))
	matches = append(matches, s.ledger, s.script)
	sort.Strings(matches)
	for _, m := range matches {
		harness.KeepFile(m, filepath.Join(dst, filepath.Base(m)))
	}
	return dst
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
