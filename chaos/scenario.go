package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/chaos/provider"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The environment of one cell: a fresh 3-node cluster in a temporary
// directory, the Workers of the cell, the faults of its column and the
// checks every cell makes.

// startBalancer, when set, puts a load balancer that checks /readyz in
// front of the nodes and returns its address; the Workers of every column
// but takeover-dex use it. Without it every Worker uses dex:///.
var startBalancer func(dir string, nodes []*harness.Node) (addr string, stop func(), err error)

// Balancer says what the Workers' target is, for the report.
func Balancer() string {
	if startBalancer == nil {
		return "dex:/// (no load balancer wired in)"
	}
	return "HAProxy checking /readyz/leader (takeover-dex: dex:///)"
}

const (
	waitLong  = 60 * time.Second // a session reaching its final state
	waitShort = 30 * time.Second // a moment or a recovery
)

type cellEnv struct {
	*cellLog
	cellSessions
	cellLedger
	cellFailpoints
	autoReleaser

	cell    Cell
	col     string
	opts    MatrixOptions
	dir     string
	cluster *harness.Cluster
	conn    *grpc.ClientConn
	admin   dexv1.AdminServiceClient

	target      string // the Workers' target
	stopBalance func()
	script      string
	workerArgs  []string // extra flags of every Worker of the cell
	workers     []*harness.Worker
	w           *harness.Worker // the Worker that runs now
	// The scripted model of a certify cell (nil: the demo Worker's own).
	provider    *provider.Server
	providerURL string

	snapshots []map[string]*dexv1.GetSessionResponse // before each fault
	takeovers []time.Duration
	killed    []*harness.Node // taken-over leaders, restarted at the end
	pauses    []*pauseMark
	// With several partitions: the Worker of the background sessions the
	// takeovers run (scenario_partitions.go), and how many ran.
	bgWorker  *harness.Worker
	bgStrikes int
}

// cellLog is what every part of a cell shares: the cell's context, which
// ends with the cell, and the notes of what it did (OUT/cells/NAME.txt).
type cellLog struct {
	ctx   context.Context
	notes []string
}

func (e *cellLog) notef(format string, args ...any) {
	e.notes = append(e.notes, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (e *cellLog) timeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, d)
}

// sleep waits d unless the cell is over.
func (e *cellLog) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-e.ctx.Done():
		return e.ctx.Err()
	case <-t.C:
		return nil
	}
}

type pauseMark struct {
	node      *harness.Node
	oldEpoch  uint64
	stoppedAt time.Time
	logOffset int64 // the node's log at SIGCONT
	logEnd    int64 // and at the cell's next fault (0: the end)
	readyWoke bool  // the woken node answered /readyz 200
}

func newCellEnv(ctx context.Context, o MatrixOptions, c Cell, dexdDir string) (*cellEnv, error) {
	dir, err := os.MkdirTemp(o.TmpDir, "dexchaos-"+slug(c.Column.Name+"-"+c.Row.Step+"-"+c.Row.Moment)+"-")
	if err != nil {
		return nil, err
	}
	log, ledger := &cellLog{ctx: ctx}, filepath.Join(dir, "ledger.jsonl")
	e := &cellEnv{cellLog: log, cellSessions: cellSessions{cellLog: log}, cellLedger: cellLedger{cellLog: log, ledger: ledger}, cellFailpoints: cellFailpoints{cellLog: log}, autoReleaser: autoReleaser{files: ledger},
		cell: c, col: c.Column.Name, opts: o, dir: dir, script: filepath.Join(dir, "script.json")}
	if tc := o.TestCluster; tc != nil {
		e.idPrefix = "certify-" + tc.RunID + "-"
	}
	if err := os.WriteFile(e.script, []byte(matrixScript), 0o644); err != nil {
		return e, err
	}
	if o.TestCluster != nil {
		return e, e.connectTestCluster(o.TestCluster)
	}
	cl, err := harness.NewCluster(harness.ClusterOptions{BinDir: dexdDir, Dir: dir, Args: harness.ClusterArgs, Partitions: o.Partitions})
	if err != nil {
		return e, err
	}
	e.cluster = cl
	e.partitions, e.home = cl.Partitions(), homePartition(c, cl.Partitions())
	if c.Row.Failpoint != "" {
		e.gofail = map[string]string{}
		for _, n := range cl.Nodes {
			addr, err := harness.FreeAddr()
			if err != nil {
				return e, err
			}
			e.gofail[n.ID] = addr
			n.Env = append(n.Env, "GOFAIL_HTTP="+addr)
		}
	}
	if err := cl.Start(); err != nil {
		return e, err
	}
	if _, err := e.waitStart(); err != nil {
		return e, err
	}
	if e.conn, err = client.Dial(cl.Target(), cl.DialOptions()...); err != nil {
		return e, err
	}
	e.cl, e.admin = client.New(e.conn), dexv1.NewAdminServiceClient(e.conn)
	e.target = cl.Target()
	if startBalancer != nil && e.col != ColTakeoverDex {
		addr, stop, err := startBalancer(dir, cl.Nodes)
		if err != nil {
			return e, fmt.Errorf("load balancer: %w", err)
		}
		e.target, e.stopBalance = addr, stop
	}
	if e.partitioned() {
		e.notef("%d partitions; the cell's sessions live in partition %d", e.partitions, e.home)
	}
	e.notef("cluster ready; the Workers' target is %s", e.target)
	return e, nil
}

// run runs the row's scenario, then the checks every cell makes.
func (e *cellEnv) run() error {
	if err := e.runScenario(&e.cell.Row.scenario); err != nil {
		return err
	}
	return e.finalChecks()
}

// stop stops every process the cell started, by PID.
func (e *cellEnv) stop() {
	e.stopReleaser()
	for _, w := range e.workers {
		w.Kill()
	}
	if e.bgWorker != nil {
		e.bgWorker.Kill()
	}
	if e.cluster != nil {
		e.cluster.KillAll()
	}
	if e.stopBalance != nil {
		e.stopBalance()
	}
	if e.provider != nil {
		_ = e.provider.Close()
	}
	if e.conn != nil {
		e.conn.Close()
	}
}

// keepLogs copies the logs of a failed cell to the out dir.
func (e *cellEnv) keepLogs(cause error) string {
	if e.opts.Out == "" {
		return ""
	}
	dst := filepath.Join(e.opts.Out, "logs", slug(e.cell.Name()))
	if cause != nil {
		dst = filepath.Join(e.opts.Out, "failed", slug(e.cell.Name()))
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return ""
	}
	entries, _ := os.ReadDir(e.dir)
	for _, f := range entries {
		if !f.IsDir() {
			harness.KeepFile(filepath.Join(e.dir, f.Name()), filepath.Join(dst, f.Name()))
		}
	}
	harness.KeepFile(filepath.Join(e.opts.Out, "cells", slug(e.cell.Name())+".txt"), filepath.Join(dst, "cell.txt"))
	return dst
}

// writeNotes writes what the cell did to OUT/cells/NAME.txt.
func (e *cellEnv) writeNotes(cause error) {
	if e.opts.Out == "" {
		return
	}
	dir := filepath.Join(e.opts.Out, "cells")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	verdict := "pass"
	if cause != nil {
		verdict = "FAIL: " + cause.Error()
	}
	text := "cell: " + e.cell.Name() + "\nresult: " + verdict + "\n\n" + strings.Join(e.notes, "\n") + "\n"
	_ = os.WriteFile(filepath.Join(dir, slug(e.cell.Name())+".txt"), []byte(text), 0o644)
}

func (e *cellEnv) remove() { _ = os.RemoveAll(e.dir) }

// waitReady waits until the cluster serves and returns the node that
// leads the cell's sessions: the one ready node, or with several
// partitions the leader of the cell's partition.
func (e *cellEnv) waitReady() (*harness.Node, error) {
	ctx, cancel := e.timeout(waitShort)
	defer cancel()
	if e.partitioned() {
		return e.cluster.WaitPartitions(ctx, e.home)
	}
	return e.cluster.WaitReady(ctx)
}

// waitStart is waitReady for a cluster that just started: with several
// partitions it also waits until the leaderships are spread, so a fault
// strikes a node that leads the cell's partition and not the others.
func (e *cellEnv) waitStart() (*harness.Node, error) {
	if !e.partitioned() {
		return e.waitReady()
	}
	ctx, cancel := e.timeout(waitShort)
	defer cancel()
	return e.cluster.WaitSpread(ctx, e.home)
}

// waitReadyOther waits until a running node other than not answers
// /readyz 200.
func (e *cellEnv) waitReadyOther(not *harness.Node) (*harness.Node, error) {
	deadline := time.Now().Add(waitShort)
	for {
		for _, n := range e.cluster.Nodes {
			if n != not && n.Running() && n.Ready() {
				return n, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no node but %s became ready within %s", not.ID, waitShort)
		}
		if err := e.sleep(20 * time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// ---- Workers

// startWorker starts a Worker on the cell's target with the cell's script
// and flags; it becomes the current Worker.
func (e *cellEnv) startWorker(args ...string) (*harness.Worker, error) {
	name := e.workerName(len(e.workers) + 1)
	var token string
	var err error
	if e.cluster != nil {
		token, err = e.cluster.WorkerToken(e.ctx, name)
	} else if e.opts.TestCluster != nil {
		token = e.opts.TestCluster.Token
	}
	if err != nil {
		return nil, err
	}
	var w *harness.Worker
	if e.opts.UserWorker != nil {
		if w, err = e.userWorker(name, token, append(append([]string{}, e.workerArgs...), args...)); err != nil {
			return nil, err
		}
	} else {
		w = harness.NewWorker(harness.WorkerOptions{
			BinDir: e.opts.BinDir, Dir: e.dir, Name: name, Target: e.target, Token: token,
			Ledger: e.ledger, Script: e.script, Args: append(append([]string{}, e.workerArgs...), args...),
			TLS: e.cluster.TLS(), Lang: e.opts.Worker, Adapter: e.opts.Adapter,
		})
	}
	e.workers = append(e.workers, w)
	if err := w.Start(); err != nil {
		return nil, err
	}
	e.w = w
	e.notef("started Worker %s (pid %d) %v", w.Name, w.PID(), args)
	return w, nil
}

// held is a task a Worker holds.
type held struct {
	Moment, Step, Session, Kind, Tool string
	Attempt                           int
	desc                              string
}

func parseHeld(desc string) held {
	f := strings.Fields(desc)
	h := held{desc: desc}
	if len(f) > 0 {
		h.Moment = f[0]
	}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "step":
			h.Step = v
		case "session":
			h.Session = v
		case "kind":
			h.Kind = v
		case "tool":
			h.Tool = v
		case "attempt":
			h.Attempt, _ = strconv.Atoi(v)
		}
	}
	return h
}

func (e *cellEnv) waitHeld() (held, error) {
	ctx, cancel := e.timeout(waitShort)
	defer cancel()
	desc, err := e.w.WaitHeld(ctx)
	if err != nil && e.opts.UserWorker != nil && e.w.Running() {
		return held{}, fmt.Errorf("your Worker %s never paused at a hold within %s: it must run on a Dex Worker library that reads DEX_HOLD, with no hold hook of its own (%v)", e.w.Name, waitShort, err)
	}
	if err != nil {
		return held{}, err
	}
	e.notef("held: %s", desc)
	return parseHeld(desc), nil
}

// release lets the current Worker go on if it holds.
func (e *cellEnv) release() error {
	if _, err := os.Stat(e.ledger + ".held"); err != nil {
		return nil
	}
	e.notef("release")
	return e.w.Release()
}

// releaseAndWait releases a hold and waits until the Worker went on.
func (e *cellEnv) releaseAndWait(h held) error {
	if err := e.w.Release(); err != nil {
		return err
	}
	deadline := time.Now().Add(waitShort)
	for {
		_, relErr := os.Stat(e.ledger + ".release")
		b, heldErr := os.ReadFile(e.ledger + ".held")
		if os.IsNotExist(relErr) && (heldErr != nil || strings.TrimSpace(string(b)) != h.desc) {
			return nil
		}
		if !e.w.Running() {
			return fmt.Errorf("%s exited while being released", e.w.Name)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not go on after a release of %q", e.w.Name, h.desc)
		}
		if err := e.sleep(10 * time.Millisecond); err != nil {
			return err
		}
	}
}

// holdUntil releases every hold of the current Worker that does not match
// and returns the first that does, still held.
func (e *cellEnv) holdUntil(what string, match func(held) bool) (held, error) {
	deadline := time.Now().Add(waitShort)
	for time.Now().Before(deadline) {
		h, err := e.waitHeld()
		if err != nil {
			return held{}, fmt.Errorf("waiting for %s: %w", what, err)
		}
		if match(h) {
			return h, nil
		}
		if err := e.releaseAndWait(h); err != nil {
			return held{}, err
		}
	}
	return held{}, fmt.Errorf("the Worker never held %s within %s", what, waitShort)
}

// autoReleaser releases every hold of the cell's Workers, once a scenario
// no longer stops at them, until the cell ends.
type autoReleaser struct {
	files   string // the ledger: the Workers' .held and .release files sit beside it
	relMu   sync.Mutex
	relStop chan struct{}
	relDone chan struct{}
}

// autoRelease releases every later hold of any Worker of the cell until
// the cell ends.
func (e *autoReleaser) autoRelease() {
	e.relMu.Lock()
	defer e.relMu.Unlock()
	if e.relStop != nil {
		return
	}
	e.relStop, e.relDone = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if _, err := os.Stat(e.files + ".held"); err == nil {
				if _, err := os.Stat(e.files + ".release"); os.IsNotExist(err) {
					_ = os.WriteFile(e.files+".release", []byte("go\n"), 0o644)
				}
			}
		}
	}(e.relStop, e.relDone)
}

func (e *autoReleaser) stopReleaser() {
	e.relMu.Lock()
	defer e.relMu.Unlock()
	if e.relStop != nil {
		close(e.relStop)
		<-e.relDone
		e.relStop = nil
	}
}

// ---- Sessions

// cellSessions creates the cell's sessions and reads them across its
// faults.
type cellSessions struct {
	*cellLog
	cl       *client.Client
	sessions []string // created, in order
	// idPrefix keeps a certify run's session ids apart on a test cluster.
	idPrefix string
	// With several partitions every session of the cell is drawn into
	// the cell's partition, home.
	partitions, home int
}

func (e *cellSessions) createSession(msg string, compactionThreshold uint64) (string, error) {
	id := idIn(e.idPrefix+fmt.Sprintf("s%d-%d", len(e.sessions)+1, time.Now().UnixNano()%1e9), e.home, e.partitions)
	err := e.retry("create session", func(ctx context.Context) error {
		_, err := e.cl.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: msg, CompactionThreshold: compactionThreshold})
		if status.Code(err) == codes.AlreadyExists {
			return nil // our own earlier try
		}
		return err
	})
	if err != nil {
		return "", err
	}
	e.sessions = append(e.sessions, id)
	e.notef("session %s: %q", id, msg)
	return id, nil
}

// retry repeats a call across a fault until it gets a definite answer.
func (e *cellSessions) retry(what string, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(waitShort)
	for {
		ctx, cancel := e.timeout(3 * time.Second)
		err := f(ctx)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.Canceled:
		default:
			return fmt.Errorf("%s: %w", what, err)
		}
		if time.Now().After(deadline) || e.ctx.Err() != nil {
			return fmt.Errorf("%s: no answer within %s: %w", what, waitShort, err)
		}
		if err := e.sleep(100 * time.Millisecond); err != nil {
			return err
		}
	}
}

func (e *cellSessions) get(id string) (*dexv1.GetSessionResponse, error) {
	var r *dexv1.GetSessionResponse
	err := e.retry("get session "+id, func(ctx context.Context) error {
		var err error
		r, err = e.cl.GetSession(ctx, id)
		return err
	})
	return r, err
}

// waitFor polls the session until cond holds.
func (e *cellSessions) waitFor(id, what string, d time.Duration, cond func(*dexv1.GetSessionResponse) bool) (*dexv1.GetSessionResponse, error) {
	deadline := time.Now().Add(d)
	var last *dexv1.GetSessionResponse
	for {
		ctx, cancel := e.timeout(3 * time.Second)
		r, err := e.cl.GetSession(ctx, id)
		cancel()
		if err == nil {
			last = r
			if cond(r) {
				return r, nil
			}
		}
		if time.Now().After(deadline) || e.ctx.Err() != nil {
			if last == nil {
				return nil, fmt.Errorf("session %s: %s not reached within %s: %v", id, what, d, err)
			}
			return nil, fmt.Errorf("session %s: %s not reached within %s; status %s; steps: %s", id, what, d, fsm.StatusName(fsmpb.SessionStatus(last.Session.Status)), describe(last.Steps))
		}
		if err := e.sleep(50 * time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// waitIdle waits until the session is idle with nothing queued: its final
// state.
func (e *cellSessions) waitIdle(id string) (*dexv1.GetSessionResponse, error) {
	return e.waitFor(id, "idle", waitLong, func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE && len(r.Session.Inbox) == 0
	})
}

// describe lists Steps for an error message: the last 12 of them.
func describe(steps []*dexv1.Step) string {
	var parts []string
	if n := len(steps); n > 12 {
		parts = append(parts, fmt.Sprintf("(%d more)", n-12))
		steps = steps[n-12:]
	}
	for _, st := range steps {
		var as []string
		for _, a := range st.Attempts {
			as = append(as, fmt.Sprintf("%d:%s/%s/%s/e%d", a.N, a.WorkerId, strings.TrimPrefix(a.Status.String(), "ATTEMPT_STATUS_"),
				strings.TrimPrefix(a.Progress.String(), "ATTEMPT_PROGRESS_"), a.Epoch))
		}
		parts = append(parts, fmt.Sprintf("[%s %s %s %s %s attempts=%v]", st.Id, fsm.KindName(fsmpb.StepKind(st.Kind)), st.Tool,
			strings.TrimPrefix(st.Status.String(), "STEP_STATUS_"), fsm.OutcomeName(fsmpb.Outcome(st.Outcome)), as))
	}
	return strings.Join(parts, " ")
}

func stepsBy(r *dexv1.GetSessionResponse, kind dexv1.StepKind, tool string) []*dexv1.Step {
	var out []*dexv1.Step
	for _, st := range r.Steps {
		if st.Kind == kind && (tool == "" || st.Tool == tool) {
			out = append(out, st)
		}
	}
	return out
}

// oneStep is the only Step of kind (and tool).
func oneStep(r *dexv1.GetSessionResponse, kind dexv1.StepKind, tool string) (*dexv1.Step, error) {
	s := stepsBy(r, kind, tool)
	if len(s) != 1 {
		return nil, fmt.Errorf("%d %s %s Steps; want 1: %s", len(s), fsm.KindName(fsmpb.StepKind(kind)), tool, describe(r.Steps))
	}
	return s[0], nil
}

func stepByID(r *dexv1.GetSessionResponse, id string) *dexv1.Step {
	for _, st := range r.Steps {
		if st.Id == id {
			return st
		}
	}
	return nil
}

// toolResults are the history's results of a call.
func toolResults(r *dexv1.GetSessionResponse, callID string) []*dexv1.HistoryEntry {
	var out []*dexv1.HistoryEntry
	for _, h := range r.Session.History {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT && h.CallId == callID {
			out = append(out, h)
		}
	}
	return out
}

// toldOnce checks the model is told the call's outcome exactly once.
func toldOnce(r *dexv1.GetSessionResponse, st *dexv1.Step) error {
	tr := toolResults(r, st.CallId)
	if len(tr) != 1 {
		return fmt.Errorf("the history has %d results of call %s (%s); want 1", len(tr), st.CallId, st.Tool)
	}
	if tr[0].Outcome != st.Outcome {
		return fmt.Errorf("the model is told %s for call %s, the Step recorded %s", fsm.OutcomeName(fsmpb.Outcome(tr[0].Outcome)), st.CallId, fsm.OutcomeName(fsmpb.Outcome(st.Outcome)))
	}
	return nil
}

func countKind(r *dexv1.GetSessionResponse, k dexv1.HistoryKind) int {
	n := 0
	for _, h := range r.Session.History {
		if h.Kind == k {
			n++
		}
	}
	return n
}

// ---- Faults

// strike applies the column's fault at the row's moment.
func (e *cellEnv) strike() error { return e.strikeWith(strikeOpts{}) }

type strikeOpts struct {
	// Worker kill: the flags of the new Worker.
	nextWorker []string
	// Server restart: stay down until this time.
	downUntil time.Time
}

func (e *cellEnv) strikeWith(o strikeOpts) error {
	if err := e.snapshot(); err != nil {
		return fmt.Errorf("before the fault: %w", err)
	}
	for _, p := range e.pauses {
		if p.logEnd == 0 {
			if fi, err := os.Stat(p.node.LogPath); err == nil {
				p.logEnd = fi.Size()
			}
		}
	}
	switch e.col {
	case ColWorkerKill:
		return e.killWorker(o.nextWorker)
	case ColServerRestart:
		return e.restartServers(o.downUntil)
	case ColTakeover, ColTakeoverDex:
		return e.takeover()
	case ColLeaderPause:
		return e.pauseLeader()
	}
	return fmt.Errorf("unknown column %q", e.col)
}

// snapshot records every session before a fault: nothing committed may be
// lost.
func (e *cellEnv) snapshot() error {
	snap := map[string]*dexv1.GetSessionResponse{}
	for _, id := range e.sessions {
		r, err := e.get(id)
		if err != nil {
			return err
		}
		snap[id] = r
	}
	e.snapshots = append(e.snapshots, snap)
	return nil
}

func (e *cellEnv) killWorker(next []string) error {
	old := e.w
	old.Kill()
	_ = os.Remove(e.ledger + ".held") // the dead Worker's hold
	_ = os.Remove(e.ledger + ".release")
	e.notef("SIGKILL Worker %s (pid %d)", old.Name, old.PID())
	_, err := e.startWorker(next...)
	return err
}

func (e *cellEnv) restartServers(downUntil time.Time) error {
	e.cluster.KillAll()
	e.notef("SIGKILL every dexd")
	if d := time.Until(downUntil); d > 0 {
		if err := e.sleep(d); err != nil {
			return err
		}
	}
	if err := e.cluster.Start(); err != nil {
		return err
	}
	n, err := e.waitReady()
	if err != nil {
		return fmt.Errorf("after the restart: %w", err)
	}
	e.notef("restarted every dexd; %s is ready", n.ID)
	return nil
}

func (e *cellEnv) takeover() error {
	// A node killed by an earlier takeover of the cell rejoins first, so
	// the cluster has its three nodes again.
	if err := e.rejoin(); err != nil {
		return err
	}
	if e.partitioned() {
		return e.takeoverPartition()
	}
	old, err := e.waitReady()
	if err != nil {
		return err
	}
	t0 := time.Now()
	old.Kill()
	next, err := e.waitReadyOther(old)
	if err != nil {
		return fmt.Errorf("takeover: %w", err)
	}
	took := time.Since(t0)
	e.takeovers = append(e.takeovers, took)
	e.killed = append(e.killed, old)
	e.notef("SIGKILL leader %s; %s ready after %s", old.ID, next.ID, took.Round(time.Millisecond))
	return nil
}

func (e *cellEnv) epoch() (uint64, error) {
	var ep uint64
	err := e.retry("cluster status", func(ctx context.Context) error {
		st, err := e.admin.Status(ctx, &dexv1.StatusRequest{})
		if err != nil {
			return err
		}
		ep = st.Epoch
		if e.partitioned() {
			p, err := e.homeStatus(st)
			if err != nil {
				return err
			}
			ep = p.Epoch
		}
		return nil
	})
	return ep, err
}

// pauseLeader stops the leader until a standby serves, a while longer, then
// wakes it and waits until it has stepped down.
func (e *cellEnv) pauseLeader() error {
	old, err := e.waitReady()
	if err != nil {
		return err
	}
	ep, err := e.epoch()
	if err != nil {
		return err
	}
	if err := old.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// Stamped after the signal: whatever the old leader stamped came before.
	p := &pauseMark{node: old, oldEpoch: ep, stoppedAt: time.Now()}
	e.pauses = append(e.pauses, p)
	var next *harness.Node
	if e.partitioned() {
		next, err = e.waitLeaderOther(old)
	} else {
		next, err = e.waitReadyOther(old)
	}
	if err != nil {
		_ = old.Signal(syscall.SIGCONT)
		return fmt.Errorf("leader pause: %w", err)
	}
	// Past the election timeout for sure, and long enough for the new
	// leader to act while the old one sleeps.
	if err := e.sleep(time.Second); err != nil {
		return err
	}
	if fi, err := os.Stat(old.LogPath); err == nil {
		p.logOffset = fi.Size()
	}
	if err := old.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	e.notef("SIGSTOP leader %s (epoch %d) for %s; %s took over", old.ID, ep, time.Since(p.stoppedAt).Round(time.Millisecond), next.ID)
	if e.partitioned() {
		// Every node is ready: the woken node must name another leader.
		return e.waitDeposed(old)
	}
	// Watch the woken node until exactly one node (not it) is ready.
	deadline := time.Now().Add(waitShort)
	for {
		if old.Ready() {
			p.readyWoke = true
		}
		var ready []*harness.Node
		for _, n := range e.cluster.Nodes {
			if n.Running() && n.Ready() {
				ready = append(ready, n)
			}
		}
		if len(ready) == 1 && ready[0] != old && !old.Ready() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leader pause: the cluster did not settle on one ready node after SIGCONT")
		}
		if err := e.sleep(50 * time.Millisecond); err != nil {
			return err
		}
	}
}

// ---- Checks every cell makes

func (e *cellEnv) finalChecks() error {
	e.stopReleaser()
	final := map[string]*dexv1.GetSessionResponse{}
	for _, id := range e.sessions {
		r, err := e.get(id)
		if err != nil {
			return err
		}
		final[id] = r
		e.notef("final %s: %s; steps: %s", id, fsm.StatusName(fsmpb.SessionStatus(r.Session.Status)), describe(r.Steps))
	}
	if err := e.checkNothingLost(final); err != nil {
		return err
	}
	if err := e.checkExecutionsCommitted(final); err != nil {
		return err
	}
	for _, p := range e.pauses {
		if err := e.checkPause(p, final); err != nil {
			return err
		}
	}
	return e.rejoin()
}

// checkNothingLost: the history before each fault is a prefix of the
// history after it, and every attempt recorded before is still recorded.
func (e *cellEnv) checkNothingLost(final map[string]*dexv1.GetSessionResponse) error {
	for i, snap := range e.snapshots {
		for id, before := range snap {
			after := final[id]
			bh, ah := before.Session.History, after.Session.History
			if len(ah) < len(bh) {
				return fmt.Errorf("fault %d lost history of %s: %d entries before, %d after", i+1, id, len(bh), len(ah))
			}
			for j := range bh {
				if !proto.Equal(bh[j], ah[j]) {
					return fmt.Errorf("fault %d changed history entry %d of %s: %v became %v", i+1, j, id, bh[j], ah[j])
				}
			}
			for _, bs := range before.Steps {
				as := stepByID(after, bs.Id)
				if as == nil {
					return fmt.Errorf("fault %d lost Step %s of %s", i+1, bs.Id, id)
				}
				if len(as.Attempts) < len(bs.Attempts) {
					return fmt.Errorf("fault %d lost attempts of Step %s: %d before, %d after", i+1, bs.Id, len(bs.Attempts), len(as.Attempts))
				}
				for k, ba := range bs.Attempts {
					aa := as.Attempts[k]
					if aa.N != ba.N || aa.WorkerId != ba.WorkerId || aa.Epoch != ba.Epoch || aa.Token != ba.Token {
						return fmt.Errorf("fault %d changed attempt %d of Step %s: %v became %v", i+1, ba.N, bs.Id, ba, aa)
					}
					if ba.Status != dexv1.AttemptStatus_ATTEMPT_STATUS_RUNNING && aa.Status != ba.Status {
						return fmt.Errorf("fault %d changed the ended attempt %d of Step %s from %s to %s", i+1, ba.N, bs.Id, ba.Status, aa.Status)
					}
				}
				if bs.Status == dexv1.StepStatus_STEP_STATUS_DONE && (as.Outcome != bs.Outcome || as.Result != bs.Result) {
					return fmt.Errorf("fault %d changed the outcome of Step %s from %s to %s", i+1, bs.Id, fsm.OutcomeName(fsmpb.Outcome(bs.Outcome)), fsm.OutcomeName(fsmpb.Outcome(as.Outcome)))
				}
			}
		}
	}
	return nil
}

// checkExecutionsCommitted: every execution in the ledger belongs to an
// attempt the cluster committed to that Worker, claimed before it ran.
func (e *cellEnv) checkExecutionsCommitted(final map[string]*dexv1.GetSessionResponse) error {
	l, err := e.ledgerLines()
	if err != nil {
		return err
	}
	for _, x := range l {
		r := final[x.Session]
		if r == nil {
			return fmt.Errorf("the ledger has an execution for unknown session %q", x.Session)
		}
		st := stepByID(r, x.Step)
		if st == nil {
			return fmt.Errorf("ledger: %s ran for Step %s, which the session does not have", x.Tool, x.Step)
		}
		var at *dexv1.Attempt
		for _, a := range st.Attempts {
			if a.N == x.Attempt {
				at = a
			}
		}
		if at == nil || at.WorkerId != x.Worker {
			return fmt.Errorf("ledger: %s ran as attempt %d of Step %s on %s, which the cluster never handed to it: %s", x.Tool, x.Attempt, x.Step, x.Worker, describe([]*dexv1.Step{st}))
		}
		if at.ClaimedAtMs == 0 {
			return fmt.Errorf("ledger: %s ran as attempt %d of Step %s, which was never claimed", x.Tool, x.Attempt, x.Step)
		}
	}
	return nil
}

// logLines are the JSON log lines of a node from offset to end (0: the
// end of the file).
func logLines(path string, offset, end int64) []string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return nil
	}
	if end > 0 && end <= int64(len(b)) {
		b = b[:end]
	}
	return strings.Split(string(b[offset:]), "\n")
}

// checkPause: after the pause a newer epoch leads; no attempt started after
// the pause carries the old epoch; the woken node proposed nothing before
// (if ever) it led again.
func (e *cellEnv) checkPause(p *pauseMark, final map[string]*dexv1.GetSessionResponse) error {
	// Any node answers Status from its own state: the woken node may
	// answer before it applied the new leader's epoch, so read until one
	// is seen. Had no standby taken over, none would ever be.
	deadline := time.Now().Add(waitShort)
	for {
		ep, err := e.epoch()
		if err != nil {
			return err
		}
		if ep > p.oldEpoch {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leader pause: the epoch is still %d after the pause; want a newer one", ep)
		}
		if err := e.sleep(50 * time.Millisecond); err != nil {
			return err
		}
	}
	stopped := p.stoppedAt.UnixMilli()
	for _, r := range final {
		for _, st := range r.Steps {
			for _, a := range st.Attempts {
				if a.StartedAtMs > stopped && a.Epoch <= p.oldEpoch {
					return fmt.Errorf("leader pause: attempt %d of Step %s started after the pause under the old epoch %d (the deposed leader handed it out)", a.N, st.Id, a.Epoch)
				}
			}
		}
	}
	for _, line := range logLines(p.node.LogPath, p.logOffset, p.logEnd) {
		if strings.Contains(line, "leadership gained") {
			break // it won a later election: it leads legitimately
		}
		for _, bad := range []string{"due timer proposed", "attempt expired: no heartbeat", "dispatch lease established"} {
			if strings.Contains(line, bad) {
				return fmt.Errorf("leader pause: the woken deposed leader %s committed %q: %s", p.node.ID, bad, line)
			}
		}
	}
	if p.readyWoke {
		e.notef("note: the woken deposed leader %s answered /readyz 200 for a moment", p.node.ID)
	}
	return nil
}

// rejoin restarts the leaders a takeover killed and waits until each is a
// follower that applied everything the leader had committed (with several
// partitions: knows a leader of each, and applied what each had committed).
func (e *cellEnv) rejoin() error {
	defer func() { e.killed = nil }()
	for _, n := range e.killed {
		var commits []uint64 // one per partition
		if err := e.retry("cluster status", func(ctx context.Context) error {
			st, err := e.admin.Status(ctx, &dexv1.StatusRequest{})
			if err != nil {
				return err
			}
			commits, err = e.commitIndexes(st)
			return err
		}); err != nil {
			return err
		}
		if err := n.Start(); err != nil {
			return fmt.Errorf("restart %s: %w", n.ID, err)
		}
		deadline := time.Now().Add(waitShort)
		for {
			done, last := e.caughtUp(n, commits)
			if done {
				e.notef("%s restarted and rejoined (%s)", n.ID, last)
				break
			}
			if time.Now().After(deadline) {
				if !e.partitioned() {
					return fmt.Errorf("the killed leader %s did not rejoin within %s (want a follower at index %d): %s", n.ID, waitShort, commits[0], last)
				}
				return fmt.Errorf("the killed leader %s did not rejoin within %s (want a leader known and commit indexes %v applied): %s", n.ID, waitShort, commits, last)
			}
			if err := e.sleep(100 * time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// commitIndexes are a Status answer's commit index of each partition (of
// the one raft group without partitions).
func (e *cellEnv) commitIndexes(st *dexv1.StatusResponse) ([]uint64, error) {
	if !e.partitioned() {
		return []uint64{st.CommitIndex}, nil
	}
	if len(st.Partitions) != e.partitions {
		return nil, fmt.Errorf("%s lists %d partitions; want %d", st.AnsweredBy, len(st.Partitions), e.partitions)
	}
	var out []uint64
	for _, p := range st.Partitions {
		out = append(out, p.CommitIndex)
	}
	return out, nil
}

// caughtUp asks the restarted node n whether it applied the commit
// indexes, and says what it answered.
func (e *cellEnv) caughtUp(n *harness.Node, commits []uint64) (bool, string) {
	ctx, cancel := e.timeout(2 * time.Second)
	defer cancel()
	if e.partitioned() {
		parts, err := e.cluster.PartitionStatus(ctx, n)
		if err != nil {
			return false, err.Error()
		}
		return partitionsCaughtUp(parts, commits)
	}
	conn, err := grpc.NewClient(n.GRPCAddr, e.cluster.ConnOptions()...)
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close()
	st, err := dexv1.NewAdminServiceClient(conn).NodeState(ctx, &dexv1.NodeStateRequest{})
	if err != nil {
		return false, err.Error()
	}
	return strings.EqualFold(st.State, "follower") && st.AppliedIndex >= commits[0], fmt.Sprintf("%s applied %d", st.State, st.AppliedIndex)
}
