package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// Moments at which WorkerOptions.Hold is called.
const (
	// HoldBeforeClaim: the Worker holds a task and has not claimed it yet.
	HoldBeforeClaim = "before-claim"
	// HoldAfterClaim: the claim is committed; no handler has started.
	HoldAfterClaim = "after-claim"
	// HoldToolRunning: right before a tool handler (CallTool,
	// CallSingleAttemptTool) is invoked.
	HoldToolRunning = "tool-running"
	// HoldBeforeResult: the handler returned (its ledger end line is
	// written); its result is not sent yet.
	HoldBeforeResult = "before-result"
	// HoldAfterResultSent: ReportTask returned OK for a result.
	HoldAfterResultSent = "after-result-sent"
	// HoldDuringPoll: right before a PollToolTask handler is invoked.
	HoldDuringPoll = "during-poll"
	// HoldDuringCompaction: right before the compaction handler is invoked.
	HoldDuringCompaction = "during-compaction"
	// HoldBeforeModel: right before the model handler (RunModel) is invoked.
	HoldBeforeModel = "before-model"
)

// Moments lists every Hold moment.
var Moments = []string{
	HoldBeforeClaim, HoldAfterClaim, HoldToolRunning, HoldBeforeResult, HoldAfterResultSent,
	HoldDuringPoll, HoldDuringCompaction, HoldBeforeModel,
}

// ToolCall is what a tool handler is asked to do.
type ToolCall struct {
	SessionID string
	StepID    string
	CallID    string
	Tool      string
	// Arguments is JSON text.
	Arguments string
	// IdempotencyKey is the same in every attempt of a write.
	IdempotencyKey string
	Attempt        uint32
	// TaskID is the long-running task to poll (Poll handlers only).
	TaskID string
	Access dexv1.ToolAccess
	// Epoch is the dispatch epoch the attempt was started under (the
	// lease's fencing token).
	Epoch uint64
	// Agent is the agent of the call's session ("": the default agent).
	Agent string
	// Traceparent is the attempt's place in its turn's trace (W3C
	// traceparent; "" when the turn is not traced). The handler's context
	// already holds the Worker's span under it (docs/tracing.md).
	Traceparent string
	// out carries the progress the handler streams (ToolCall.Stream).
	out *outputStream
}

// ToolResult is a tool handler's answer.
type ToolResult struct {
	Content string
	// The tool ran and answered with an error (the call fails; the attempt
	// does not).
	IsError bool
	// TaskID: a long-running tool's start returns the task to poll.
	TaskID string
}

func (r ToolResult) proto() *dexv1.ToolResult {
	return &dexv1.ToolResult{Content: r.Content, IsError: r.IsError, TaskId: r.TaskID}
}

// ToolHandler runs a tool call. An error fails the attempt (with the type of
// a *ModelError, if it is one); the cluster decides whether to retry by the
// tool's policy.
type ToolHandler func(ctx context.Context, call ToolCall) (ToolResult, error)

// PollHandler polls a long-running tool's task (call.TaskID).
type PollHandler func(ctx context.Context, call ToolCall) (done bool, result ToolResult, err error)

// Tool is a tool the Worker serves: its policy and its handlers. The
// Worker serves it for the agents Spec.Agents lists, or for every agent
// when it lists none.
type Tool struct {
	Spec *dexv1.ToolSpec
	Run  ToolHandler
	// Poll is required for a long_running tool.
	Poll PollHandler
}

// ModelInput is what a model handler sees.
type ModelInput struct {
	SessionID string
	StepID    string
	Attempt   uint32
	// History since the last summary.
	History []*dexv1.HistoryEntry
	Tools   []*dexv1.ToolSpec
	// Compact: CompactContext (summarise History).
	Compact bool
	// Epoch is the dispatch epoch the attempt was started under.
	Epoch uint64
	// Agent is the session's agent, one of WorkerOptions.Agents ("": the
	// default agent): a Worker of several agents runs its model.
	Agent string
	// Traceparent is the attempt's place in its turn's trace, as for
	// ToolCall.Traceparent.
	Traceparent string
	// out carries what the handler streams (ModelInput.Stream).
	out *outputStream
}

// ModelHandler runs RunModel and CompactContext Steps. An error fails the
// attempt with the type ClassifyError gives it: return a *ModelError (see
// NewHTTPModelError) to choose it; a plain error is unknown (see
// docs/model-errors.md).
type ModelHandler interface {
	RunModel(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error)
	Compact(ctx context.Context, in ModelInput) (summary string, err error)
}

// ModelFuncs adapts two functions to a ModelHandler.
type ModelFuncs struct {
	Run         func(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error)
	CompactFunc func(ctx context.Context, in ModelInput) (string, error)
}

func (m ModelFuncs) RunModel(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error) {
	if m.Run == nil {
		return nil, errors.New("no model function")
	}
	return m.Run(ctx, in)
}

func (m ModelFuncs) Compact(ctx context.Context, in ModelInput) (string, error) {
	if m.CompactFunc == nil {
		return "", errors.New("no compaction function")
	}
	return m.CompactFunc(ctx, in)
}

// ModelError is a handler error with an error type (docs/model-errors.md): the attempt
// fails with that type.
type ModelError struct {
	Type dexv1.ErrorType
	Msg  string
	// RetryAfter is the provider's Retry-After (0: none). With a rate_limit
	// Type the cluster holds the session's provider for that long.
	RetryAfter time.Duration
}

func (e *ModelError) Error() string {
	if e.Msg == "" {
		return e.Type.String()
	}
	return e.Msg
}

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// ID names the Worker; default hostname-pid.
	ID    string
	Tools []Tool
	// Model, if set, makes the Worker run RunModel and CompactContext Steps.
	Model ModelHandler
	// Agents are the agents whose model the Worker runs (NAME or
	// NAME@VERSION, matched exactly; none: the default agent only). It gets
	// the model Steps of their sessions only.
	Agents []string
	// ModelRunTimeout bounds one RunModel or CompactContext attempt from its
	// start (0: the cluster's default, dexd --run-timeout). Past it the
	// cluster cancels the attempt, heartbeats or not, and fails it with error
	// type timeout. A tool's run timeout is part of its policy:
	// ToolSpec.RunTimeoutMs.
	ModelRunTimeout time.Duration
	// Concurrency bounds the tasks run at once, whatever their partition
	// (default 4).
	Concurrency int
	// PollWait is how long one PollTask waits for work (default 20 s).
	PollWait time.Duration
	// CallTimeout bounds one try of a Worker call (default 10 s). A try of
	// an attempt's claim, heartbeat or report waits less: about a heartbeat
	// interval, between 1 and 2 s (see callTry).
	CallTimeout time.Duration
	// ShutdownGrace is how long running tasks may go on after Run's ctx
	// ends (default 5 s); then their contexts are cancelled.
	ShutdownGrace time.Duration
	// Logger gets the Worker's log. Without one the Worker writes only the
	// lines that say whether it reached the cluster (why it cannot register,
	// where it registered, that it deregistered) to stderr; zap.NewNop()
	// silences those too.
	Logger *zap.Logger
	// Hold, if set, is called at the named moments (see Moments) and may
	// block as long as it likes; heartbeats go on after the claim. Without
	// it, $DEX_HOLD may ask for a FileHolder (HoldEnv).
	Hold func(moment string, task *dexv1.Task)
	// Metrics, if set, counts tasks by outcome and times the handlers
	// (NewWorkerMetrics; register it yourself).
	Metrics *WorkerMetrics
}

// maxRunTimeout is the longest run timeout the cluster stores (ms in 32 bits).
const maxRunTimeout = time.Duration(math.MaxUint32) * time.Millisecond

// Worker long-polls the cluster for tasks and runs them.
type Worker struct {
	svc   dexv1.WorkerServiceClient
	opts  WorkerOptions
	log   *zap.Logger
	tools map[string]Tool

	// target names the addresses the Worker dials, for its lines.
	target string
	// stderr, when set (no Logger given), gets the registration lines.
	stderr io.Writer

	mu                sync.Mutex
	heartbeatInterval time.Duration
	registered        bool
	// partitions is how many partitions the last registration reported (at
	// least 1); resized is signalled when a registration changes it.
	partitions int
	resized    chan struct{}
	// outputs are the live output senders, by partition.
	outputs map[int]*outputSender

	// ledger, when $DEX_LEDGER is set, gets a line per handler start and end.
	ledger *Ledger
}

// NewWorker checks opts and returns a Worker on conn (see Dial). When
// $DEX_LEDGER names a file it opens it as the execution ledger (see
// LedgerEnv), and fails if it cannot.
func NewWorker(conn grpc.ClientConnInterface, opts WorkerOptions) (*Worker, error) {
	if opts.ID == "" {
		host, _ := os.Hostname()
		opts.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.PollWait <= 0 {
		opts.PollWait = 20 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 10 * time.Second
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 5 * time.Second
	}
	stderr := stderrUnlessLogger(opts.Logger, os.Stderr)
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	w := &Worker{
		svc: dexv1.NewWorkerServiceClient(conn), opts: opts, tools: map[string]Tool{},
		log: opts.Logger.With(zap.String("worker", opts.ID)), heartbeatInterval: time.Second,
		partitions: 1, resized: make(chan struct{}, 1),
		target: targetOf(conn), stderr: stderr,
	}
	for _, t := range opts.Tools {
		if t.Spec == nil || t.Spec.Name == "" {
			return nil, errors.New("a tool has no name")
		}
		name := t.Spec.Name
		if name == "ask_user" || name == "sleep" {
			return nil, fmt.Errorf("tool %q is a built-in of the cluster", name)
		}
		if _, dup := w.tools[name]; dup {
			return nil, fmt.Errorf("tool %q registered twice", name)
		}
		if t.Run == nil {
			return nil, fmt.Errorf("tool %q has no handler", name)
		}
		if t.Spec.LongRunning && t.Poll == nil {
			return nil, fmt.Errorf("long-running tool %q has no poll handler", name)
		}
		w.tools[name] = t
	}
	if opts.ModelRunTimeout < 0 || opts.ModelRunTimeout > maxRunTimeout {
		return nil, fmt.Errorf("model run timeout %s: must be between 0 (the cluster's default) and %s", opts.ModelRunTimeout, maxRunTimeout)
	}
	if err := checkAgents(opts); err != nil {
		return nil, err
	}
	if len(w.tools) == 0 && opts.Model == nil {
		return nil, errors.New("a Worker needs a tool or a model")
	}
	l, err := ledgerFromEnv()
	if err != nil {
		return nil, err
	}
	w.ledger = l
	if w.opts.Hold == nil {
		if w.opts.Hold, err = holdFromEnv(); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// ID is the Worker's id.
func (w *Worker) ID() string { return w.opts.ID }

// Run registers the Worker (retrying until the cluster answers), then
// long-polls every partition of the cluster and runs up to Concurrency
// tasks at once, whatever their partition, until ctx ends. Then
// it stops polling, lets running tasks finish for ShutdownGrace, cancels
// what is left, deregisters and returns nil. It returns an error only if
// the cluster refuses the registration.
func (w *Worker) Run(ctx context.Context) error {
	defer w.deregister()
	// Tasks outlive ctx by the grace period.
	taskCtx, cancelTasks := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTasks()
	if err := w.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, w.opts.Concurrency)
	w.pollPartitions(ctx, func(p *poller) { w.pollLoop(ctx, taskCtx, p, slots, &wg) })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(w.opts.ShutdownGrace):
	}
	w.log.Warn("shutdown grace over; cancelling running tasks")
	cancelTasks()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		w.log.Warn("tasks still running at exit")
	}
	return nil
}

func (w *Worker) register(ctx context.Context) error {
	req := &dexv1.RegisterWorkerRequest{WorkerId: w.opts.ID, RunsModel: w.opts.Model != nil,
		ModelRunTimeoutMs: uint32(w.opts.ModelRunTimeout.Milliseconds()), Agents: w.opts.Agents}
	for _, t := range w.opts.Tools {
		req.Tools = append(req.Tools, t.Spec)
	}
	b := newBackoff()
	// A try waits for the channel to be ready, so it ends as soon as the
	// cluster answers; a short first try says why it does not within a
	// few seconds (the channel's last error comes with the deadline).
	try := min(firstSayGap, w.opts.CallTimeout)
	var says sayEvery
	start, failed := time.Now(), false
	for {
		cctx, cancel := context.WithTimeout(ctx, try)
		resp, err := w.svc.RegisterWorker(cctx, req, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			w.mu.Lock()
			if resp.HeartbeatIntervalMs > 0 {
				w.heartbeatInterval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
			}
			first := !w.registered
			w.registered = true
			was, now := w.partitions, max(int(resp.Partitions), 1)
			w.partitions = now
			w.mu.Unlock()
			w.say(zap.InfoLevel, registeredLine(resp, w.target, time.Since(start), failed),
				zap.String("leader", resp.NodeId), zap.String("leader_address", resp.NodeAddress),
				zap.Int("tools", len(req.Tools)), zap.Bool("runs_model", req.RunsModel),
				zap.Uint32("heartbeat_interval_ms", resp.HeartbeatIntervalMs), zap.Uint32("heartbeat_timeout_ms", resp.HeartbeatTimeoutMs))
			if now != was {
				w.partitionsChanged(first, was, now)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transient(ctx, err) {
			err = fmt.Errorf("register worker %s with %s: %w", w.opts.ID, w.target, err)
			w.say(zap.ErrorLevel, err.Error())
			return err
		}
		if cctx.Err() == context.DeadlineExceeded {
			try = min(2*try, max(w.opts.CallTimeout, try))
		}
		if says.due(time.Now()) {
			line := fmt.Sprintf("cannot register with %s: %s; retrying", w.target, whyNot(err))
			if failed {
				line += fmt.Sprintf(" (for %s now)", time.Since(start).Round(time.Second))
			}
			w.say(zap.WarnLevel, line, zap.Error(err))
		} else {
			w.log.Debug("register: cluster not ready", zap.Error(err))
		}
		failed = true
		if err := sleep(ctx, b.next()); err != nil {
			return err
		}
	}
}

// deregisterTry bounds the one try a stopping Worker gives its
// deregistration: the TTL deregisters it anyway.
const deregisterTry = 2 * time.Second

// deregister tells the cluster, as the Worker stops, that it is gone, so
// that it does not look alive until its TTL runs out.
func (w *Worker) deregister() {
	w.mu.Lock()
	registered := w.registered
	w.mu.Unlock()
	if !registered {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(deregisterTry, w.opts.CallTimeout))
	defer cancel()
	_, err := w.svc.DeregisterWorker(ctx, &dexv1.DeregisterWorkerRequest{WorkerId: w.opts.ID})
	if status.Code(err) == codes.Unimplemented {
		w.log.Debug("the cluster cannot deregister a Worker; it drops it after its TTL")
		return
	}
	if err != nil {
		w.say(zap.WarnLevel, fmt.Sprintf("could not deregister from %s: %s; the cluster drops the Worker after its TTL", w.target, whyNot(err)), zap.Error(err))
		return
	}
	w.say(zap.InfoLevel, "deregistered")
}

// pollLoop polls p's partition and starts the tasks it gets, each holding
// one of slots while it runs, until ctx ends or the partition is gone.
func (w *Worker) pollLoop(ctx, taskCtx context.Context, p *poller, slots chan struct{}, wg *sync.WaitGroup) {
	for ctx.Err() == nil && p.partition < w.partitionCount() {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n, most := 1, w.slotsPerPoll()
	more:
		for n < most {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		tasks := w.poll(ctx, p, n)
		for i := len(tasks); i < n; i++ {
			<-slots
		}
		for i, t := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i >= n { // more than asked for: wait for a slot
					slots <- struct{}{}
				}
				defer func() { <-slots }()
				w.runTask(taskCtx, t, w.outputSender(p.partition))
			}()
		}
	}
}

// poll long-polls p's partition once for up to n tasks; it returns nil on a
// timeout, an error (after a backoff), when ctx ends or when the partition
// is gone.
func (w *Worker) poll(ctx context.Context, p *poller, n int) []*dexv1.Task {
	b := newBackoff()
	for ctx.Err() == nil {
		pctx, log, ok := w.toPartition(ctx, p)
		if !ok {
			return nil
		}
		wait := w.pollWait()
		cctx, cancel := context.WithTimeout(pctx, wait+w.opts.CallTimeout)
		resp, err := w.svc.PollTask(cctx, &dexv1.PollTaskRequest{
			WorkerId: w.opts.ID, WaitMs: uint32(wait.Milliseconds()), MaxTasks: uint32(n),
		}, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			p.conn.reached(log)
			return resp.Tasks
		}
		if ctx.Err() != nil {
			return nil
		}
		switch status.Code(err) {
		case codes.NotFound, codes.FailedPrecondition:
			// The cluster does not know this Worker (any more): register again.
			log.Warn("poll refused; registering again", zap.Error(err))
			if rerr := w.register(ctx); rerr != nil && ctx.Err() == nil {
				log.Error("register again", zap.Error(rerr))
			}
		default:
			if transient(ctx, err) {
				p.conn.lost(log, err)
			} else {
				log.Error("poll", zap.Error(err))
			}
		}
		_ = sleep(ctx, b.next())
	}
	return nil
}

func (w *Worker) hold(moment string, t *dexv1.Task) {
	if w.opts.Hold != nil {
		w.opts.Hold(moment, t)
	}
}

// send runs one logged Worker call, repeating the same request across
// transient errors until the cluster answers or ctx ends. Each try waits at
// most try; the first repeat goes out at once (a frozen or lost leader
// costs one try, not a back-off too), later ones back off. It returns the
// cluster's definite answer (nil on success).
func (w *Worker) send(ctx context.Context, log *zap.Logger, what string, try time.Duration, f func(ctx context.Context) error) error {
	b := newBackoff()
	for tries := 1; ; tries++ {
		cctx, cancel := context.WithTimeout(ctx, try)
		err := f(cctx)
		cancel()
		if err == nil {
			if tries > 1 {
				log.Info(what+" went through after retries", zap.Int("tries", tries))
			}
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		if !transient(ctx, err) {
			return err
		}
		if cctx.Err() == context.DeadlineExceeded {
			// The node took the whole try without failing: it may be alive
			// but slow (a long fsync), and a try it can never finish in
			// would be retried forever. Each timed-out try doubles the
			// next, up to CallTimeout; a frozen node is left by the
			// liveness probe whatever the try.
			try = min(2*try, max(w.opts.CallTimeout, try))
		}
		if tries == 1 {
			log.Warn(what+": cluster not reachable; retrying the same call", zap.Error(err))
			continue
		}
		if serr := sleep(ctx, b.next()); serr != nil {
			return err
		}
	}
}

// outcome of one handler run.
type outcome struct {
	complete   *dexv1.AttemptResult // set on success
	errType    dexv1.ErrorType
	err        error
	retryAfter time.Duration // a rate_limit failure's Retry-After
}

// failure is the report of a failed outcome.
func (o outcome) failure() *dexv1.AttemptResult {
	res := failure(o.errType, o.err.Error())
	res.GetFailure().RetryAfterMs = ceilMillis(o.retryAfter)
	return res
}

// ceilMillis rounds up, so the cluster never waits less than asked.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// live sends the live output of t's attempt (t's partition's sender).
func (w *Worker) runTask(ctx context.Context, t *dexv1.Task, live *outputSender) {
	ref := t.Ref.CloneVT()
	log := w.log.With(zap.String("session", t.SessionId), zap.String("step", ref.StepId),
		zap.Uint32("attempt", ref.Attempt), zap.String("kind", t.Kind.String()), zap.String("tool", t.Tool))
	log.Info("task received")
	ended := taskReportRefused // unless a branch below says otherwise
	defer func() { w.opts.Metrics.task(t.Kind, ended) }()

	// A task this Worker cannot run fails unclaimed: the call did not run.
	if why := w.cannotRun(t); why != "" {
		ref.Seq = 1
		err := w.report(ctx, log, "fail", w.callTry(t), ref, failure(dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED, why))
		log.Error("cannot run task", zap.String("reason", why), zap.Error(err))
		ended = taskCannotRun
		return
	}

	w.hold(HoldBeforeClaim, t)
	ref.Seq = 1
	if err := w.send(ctx, log, "claim", w.callTry(t), func(c context.Context) error {
		_, err := w.svc.ClaimTask(c, &dexv1.ClaimTaskRequest{Ref: ref}, grpc.WaitForReady(true))
		return err
	}); err != nil {
		log.Warn("claim refused; dropping the task", zap.Error(err))
		ended = taskClaimRefused
		return
	}
	log.Debug("claimed")

	hctx, cancelHandler := context.WithCancel(ctx)
	defer cancelHandler()
	var (
		hmu         sync.Mutex
		handlerDone bool
		cancelled   string
	)
	hbCtx, stopHB := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeat(hbCtx, log, t, ref.StepId, ref.Attempt, ref.Token, func(reason string) {
			hmu.Lock()
			defer hmu.Unlock()
			if !handlerDone && cancelled == "" {
				cancelled = reason
				cancelHandler()
			}
		})
	}()
	stopHeartbeats := func() {
		stopHB()
		<-hbDone
	}
	defer stopHeartbeats()

	w.hold(HoldAfterClaim, t)
	started := time.Now()
	out := w.invoke(hctx, t, ref.Attempt, live)
	w.opts.Metrics.handled(t.Kind, out.complete != nil, time.Since(started))

	hmu.Lock()
	handlerDone = true
	why := cancelled
	hmu.Unlock()
	if why != "" {
		log.Warn("attempt cancelled by the cluster; dropped", zap.String("reason", why))
		ended = taskCancelled
		return
	}

	w.hold(HoldBeforeResult, t)
	rctx := ctx
	if ctx.Err() != nil {
		// Shutting down: report what we have, briefly.
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
	}
	ref.Seq = 2
	if out.complete != nil {
		err := w.report(rctx, log, "complete", w.callTry(t), ref, out.complete)
		if err == nil {
			stopHeartbeats()
			log.Info("task completed")
			ended = taskCompleted
			w.hold(HoldAfterResultSent, t)
			return
		}
		switch status.Code(err) {
		case codes.InvalidArgument, codes.ResourceExhausted:
			// The result itself was refused and nothing was logged: fail the
			// attempt with the reason, under the same seq.
			log.Error("result refused; failing the attempt", zap.Error(err))
			out = outcome{err: fmt.Errorf("result refused by the cluster: %s", status.Convert(err).Message())}
		default:
			log.Warn("complete refused; dropping the task", zap.Error(err))
			return
		}
	}
	err := w.report(rctx, log, "fail", w.callTry(t), ref, out.failure())
	if err != nil {
		log.Warn("fail refused; dropping the task", zap.Error(err))
		return
	}
	stopHeartbeats()
	ended = taskFailed
	log.Info("task failed", zap.Error(out.err), zap.String("error_type", out.errType.String()))
}

// report sends how the attempt ended (one ReportTask), retried like every
// logged call.
func (w *Worker) report(ctx context.Context, log *zap.Logger, what string, try time.Duration, ref *dexv1.AttemptRef, res *dexv1.AttemptResult) error {
	return w.send(ctx, log, what, try, func(c context.Context) error {
		_, err := w.svc.ReportTask(c, &dexv1.ReportTaskRequest{Ref: ref, Result: res}, grpc.WaitForReady(true))
		return err
	})
}

func failure(t dexv1.ErrorType, msg string) *dexv1.AttemptResult {
	return &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_Failure{Failure: &dexv1.AttemptFailure{ErrorType: t, Error: msg}}}
}

func (w *Worker) cannotRun(t *dexv1.Task) string {
	if why := routeProblem(t); why != "" {
		return fmt.Sprintf("worker %s cannot run a %s Step: %s", w.opts.ID, t.Kind, why)
	}
	if t.Runner == dexv1.TaskRunner_TASK_RUNNER_MODEL {
		if w.opts.Model == nil {
			return fmt.Sprintf("worker %s runs no model", w.opts.ID)
		}
		return ""
	}
	if _, ok := w.tools[t.Tool]; !ok {
		return fmt.Sprintf("worker %s has no tool %q", w.opts.ID, t.Tool)
	}
	return ""
}

// routeProblem says what is wrong with how a task says it runs ("" when
// nothing): the model runs the model and compact handlers, a tool its run
// and poll handlers. A cluster older than the runner and handler fields
// sends neither.
func routeProblem(t *dexv1.Task) string {
	switch {
	case t.Runner == dexv1.TaskRunner_TASK_RUNNER_UNSPECIFIED && t.Handler == dexv1.TaskHandler_TASK_HANDLER_UNSPECIFIED:
		return "the task names no runner and no handler (a Dex server older than this Worker library sent it)"
	case t.Runner == dexv1.TaskRunner_TASK_RUNNER_MODEL &&
		(t.Handler == dexv1.TaskHandler_TASK_HANDLER_MODEL || t.Handler == dexv1.TaskHandler_TASK_HANDLER_COMPACT),
		t.Runner == dexv1.TaskRunner_TASK_RUNNER_TOOL &&
			(t.Handler == dexv1.TaskHandler_TASK_HANDLER_TOOL || t.Handler == dexv1.TaskHandler_TASK_HANDLER_POLL):
		return ""
	}
	return fmt.Sprintf("runner %s has no handler %s", t.Runner, t.Handler)
}

// invoke runs the handler for t, between its start and end lines in the
// execution ledger if there is one. A start line that cannot be written
// fails the attempt without running the handler: the run would go
// uncounted.
func (w *Worker) invoke(ctx context.Context, t *dexv1.Task, attempt uint32, live *outputSender) outcome {
	if w.ledger == nil {
		return w.runHandler(ctx, t, attempt, live, nil)
	}
	line := ledgerLine(t, w.opts.ID)
	start := func() error { return w.ledger.Append(line) }
	ctx = context.WithValue(ctx, ledgerCtxKey{}, ledgerCall{l: w.ledger, line: line})
	out := w.runHandler(ctx, t, attempt, live, start)
	if errors.Is(out.err, errLedgerStart) {
		return out
	}
	line.Phase, line.Outcome = LedgerEnd, ledgerOutcome(ctx, out)
	if err := w.ledger.Append(line); err != nil {
		w.log.Error("ledger end line not written", zap.String("step", line.Step), zap.Error(err))
	}
	return out
}

// errLedgerStart: the handler did not run, its start line was not written.
var errLedgerStart = errors.New("the handler did not run: its ledger start line was not written")

// runHandler runs the handler for t; start, if set, is called right before
// the handler (after any hold) and must succeed for it to run.
func (w *Worker) runHandler(ctx context.Context, t *dexv1.Task, attempt uint32, live *outputSender, start func() error) (out outcome) {
	ctx, span := taskSpan(ctx, t, attempt)
	defer func() { endTaskSpan(span, out.err) }() // after the recover below: it sees a panic's error
	defer func() {
		if r := recover(); r != nil {
			out = outcome{err: fmt.Errorf("handler panicked: %v", r)}
		}
		if out.err != nil {
			out.errType = handlerErrorType(ctx, t, out.err)
			if out.errType == dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT {
				out.retryAfter = RetryAfterOf(out.err)
			}
		}
	}()
	in := func() ModelInput {
		mi := t.GetModelInput()
		return ModelInput{SessionID: t.SessionId, StepID: t.Ref.GetStepId(), Attempt: attempt,
			History: mi.GetHistory(), Tools: mi.GetTools(), Compact: mi.GetCompact(), Epoch: t.Epoch, Agent: t.Agent, Traceparent: t.Traceparent}
	}
	call := ToolCall{SessionID: t.SessionId, StepID: t.Ref.GetStepId(), CallID: t.CallId, Tool: t.Tool,
		Arguments: t.Arguments, IdempotencyKey: t.IdempotencyKey, Attempt: attempt, TaskID: t.TaskId, Access: t.Access, Epoch: t.Epoch, Agent: t.Agent,
		Traceparent: t.Traceparent}
	begin := func() error {
		if start == nil {
			return nil
		}
		if err := start(); err != nil {
			return fmt.Errorf("%w: %v", errLedgerStart, err)
		}
		return nil
	}
	switch t.Handler {
	case dexv1.TaskHandler_TASK_HANDLER_MODEL:
		w.hold(HoldBeforeModel, t)
		if err := begin(); err != nil {
			return outcome{err: err}
		}
		mi := in()
		mi.out = live.open(t.Ref)
		defer mi.out.stop()
		mo, err := w.opts.Model.RunModel(ctx, mi)
		if err != nil {
			return outcome{err: err}
		}
		mi.out.finish(streamFlush)
		if mo == nil {
			mo = &dexv1.ModelOutput{}
		}
		// The cluster refuses such an output; fail the attempt with the
		// reason instead of sending it (unknown: another try may do better).
		if err := wirerules.CheckModelOutput(mo.GetToolCalls()); err != nil {
			return outcome{err: &ModelError{Type: dexv1.ErrorType_ERROR_TYPE_UNKNOWN, Msg: "the model handler's output was not sent: " + err.Error()}}
		}
		return outcome{complete: &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ModelOutput{ModelOutput: mo}}}
	case dexv1.TaskHandler_TASK_HANDLER_COMPACT:
		w.hold(HoldDuringCompaction, t)
		if err := begin(); err != nil {
			return outcome{err: err}
		}
		s, err := w.opts.Model.Compact(ctx, in())
		if err != nil {
			return outcome{err: err}
		}
		return outcome{complete: &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_Summary{Summary: s}}}
	case dexv1.TaskHandler_TASK_HANDLER_POLL:
		tool := w.tools[t.Tool]
		if tool.Poll == nil {
			return outcome{err: fmt.Errorf("tool %q has no poll handler", t.Tool)}
		}
		w.hold(HoldDuringPoll, t)
		if err := begin(); err != nil {
			return outcome{err: err}
		}
		done, res, err := tool.Poll(ctx, call)
		if err != nil {
			return outcome{err: err}
		}
		pr := &dexv1.PollResult{Done: done}
		if done {
			pr.Result = res.proto()
		}
		return outcome{complete: &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_PollResult{PollResult: pr}}}
	case dexv1.TaskHandler_TASK_HANDLER_TOOL:
		tool := w.tools[t.Tool]
		w.hold(HoldToolRunning, t)
		if err := begin(); err != nil {
			return outcome{err: err}
		}
		call.out = live.open(t.Ref)
		defer call.out.stop()
		res, err := tool.Run(ctx, call)
		if err != nil {
			return outcome{err: err}
		}
		call.out.finish(streamFlush)
		return outcome{complete: &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ToolResult{ToolResult: res.proto()}}}
	}
	return outcome{err: fmt.Errorf("no handler %s", t.Handler)} // cannotRun refused it first
}

// handlerErrorType is the error type a handler's error (or panic) is
// reported with. A model handler's error is classified (ClassifyError), so a
// plain error or a panic goes out as unknown, never untyped; only the Worker
// cancelling the handler itself (the shutdown grace is over) stays untyped,
// as a crash would. A tool handler's error has a type only if it is a
// *ModelError: tools have no error types.
func handlerErrorType(ctx context.Context, t *dexv1.Task, err error) dexv1.ErrorType {
	var me *ModelError
	if t.Runner != dexv1.TaskRunner_TASK_RUNNER_MODEL {
		if errors.As(err, &me) {
			return me.Type
		}
		return dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED
	}
	if !errors.As(err, &me) && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED
	}
	return ClassifyError(err)
}

// heartbeat keeps the attempt alive until ctx ends. cancel is called when
// the cluster says the attempt is no longer current.
func (w *Worker) heartbeat(ctx context.Context, log *zap.Logger, t *dexv1.Task, stepID string, attempt uint32, token string,
	cancel func(reason string)) {
	interval := time.Duration(t.HeartbeatIntervalMs) * time.Millisecond
	if interval <= 0 {
		w.mu.Lock()
		interval = w.heartbeatInterval
		w.mu.Unlock()
	}
	// Heartbeats carry the seq of the last logged call (the claim).
	ref := &dexv1.AttemptRef{StepId: stepID, Attempt: attempt, Token: token, Seq: 1}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cctx, ccancel := context.WithTimeout(ctx, w.callTry(t))
		resp, err := w.svc.Heartbeat(cctx, &dexv1.HeartbeatRequest{Ref: ref}, grpc.WaitForReady(true))
		ccancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && resp.Cancelled:
			cancel(resp.Reason)
			return
		case err == nil:
			if failing {
				log.Info("heartbeats reach the cluster again")
				failing = false
			}
		case status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.NotFound:
			cancel(status.Convert(err).Message())
			return
		default:
			if !failing {
				log.Warn("heartbeat failed; going on", zap.Error(err))
				failing = true
			}
		}
	}
}
