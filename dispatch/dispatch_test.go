package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/dispatch"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/leasetest"
)

const (
	queued  = fsmpb.StepStatus_STEP_STATUS_QUEUED
	running = fsmpb.StepStatus_STEP_STATUS_RUNNING
	done    = fsmpb.StepStatus_STEP_STATUS_DONE
)

type fixture struct {
	t         *testing.T
	c         *leasetest.Cluster
	clock     func() time.Time
	deadlines *lease.Deadlines
	d         *dispatch.Dispatcher
	leader    *lease.Runtime
	epoch     uint64
}

type options struct {
	heartbeatTimeout time.Duration
	clock            *leasetest.Clock
	noEstablish      bool
	// propose wraps the cluster as the dispatcher's proposer.
	propose func(*leasetest.Cluster) dispatch.Proposer
}

// newFixture registers a model Worker "model" and tool Workers "w1".."w4"
// (lookup, save_note), opens an epoch and establishes the leader services.
func newFixture(t *testing.T, o options) *fixture {
	c := leasetest.New(t)
	now := time.Now
	if o.clock != nil {
		now = o.clock.Now
		c.Now = now
	}
	if o.heartbeatTimeout == 0 {
		o.heartbeatTimeout = time.Minute // no deadline passes unless a test wants it
	}
	c.RegisterWorker("model", true)
	for i := 1; i <= 4; i++ {
		c.RegisterWorker(fmt.Sprintf("w%d", i), false, leasetest.Lookup, leasetest.SaveNote)
	}
	log := zaptest.NewLogger(t)
	f := &fixture{t: t, c: c, clock: now}
	f.deadlines = lease.NewDeadlines(c, c, lease.DeadlinesConfig{HeartbeatTimeout: o.heartbeatTimeout, HeartbeatInterval: o.heartbeatTimeout / 5, Now: now}, log)
	cfg := dispatch.Config{MaxWait: 5 * time.Second, Now: now}
	q := dispatch.NewQueues(c, c, cfg, log)
	var p dispatch.Proposer = c
	if o.propose != nil {
		p = o.propose(c)
	}
	f.d = dispatch.New(p, c, q, f.deadlines, cfg, log)
	f.leader = lease.NewRuntime(log, f.deadlines, q, f.d, dispatch.NewTimers(c, c, q, cfg, log))
	c.OnApplied(f.leader.Applied)
	t.Cleanup(f.leader.RevokeLeadership)
	if !o.noEstablish {
		f.establish()
	}
	return f
}

// establish opens a new epoch and starts the leader services, as the
// cluster's leadership loop does.
func (f *fixture) establish() {
	f.t.Helper()
	f.epoch = f.c.BumpEpoch()
	if err := f.leader.EstablishLeadership(context.Background(), f.epoch); err != nil {
		f.t.Fatalf("establish: %v", err)
	}
}

func (f *fixture) poll(worker string, max int, wait time.Duration) []*dexv1.Task {
	f.t.Helper()
	tasks, err := f.d.Poll(context.Background(), worker, max, wait)
	if err != nil {
		f.t.Fatalf("poll %s: %v", worker, err)
	}
	return tasks
}

func (f *fixture) pollOne(worker string) *dexv1.Task {
	f.t.Helper()
	tasks := f.poll(worker, 1, time.Second)
	if len(tasks) != 1 {
		f.t.Fatalf("poll %s: %d tasks; want 1", worker, len(tasks))
	}
	return tasks[0]
}

// toolSession creates a session whose model output calls the given tools.
func (f *fixture) toolSession(id string, calls ...*fsmpb.ToolCall) {
	f.t.Helper()
	f.c.CreateSession(id, "go")
	st := f.c.Queued(id)[0]
	at := f.c.Start(st.Id, "model")
	f.c.Complete(leasetest.Ref(st.Id, at), "calling tools", calls...)
}

func lookups(prefix string, n int) []*fsmpb.ToolCall {
	calls := make([]*fsmpb.ToolCall, n)
	for i := range calls {
		calls[i] = leasetest.Call(fmt.Sprintf("%s%d", prefix, i), "lookup", `{"q": 1}`)
	}
	return calls
}

func (f *fixture) step(id string) *fsmpb.Step { return f.c.State().Step(id) }

func TestPollReturnsTaskAfterStartAttemptCommitted(t *testing.T) {
	f := newFixture(t, options{})
	f.c.CreateSession("s1", "hello")
	st := f.c.Queued("s1")[0]

	// A StartAttempt that does not commit hands out nothing and uses no attempt.
	f.c.FailNext("StartAttempt", 1)
	if tasks, err := f.d.Poll(context.Background(), "model", 1, 0); err == nil || len(tasks) != 0 {
		t.Fatalf("poll with a failing proposal = %d tasks, %v; want an error", len(tasks), err)
	}
	if s := f.step(st.Id); s.Status != queued || len(s.Attempts) != 0 || f.deadlines.Armed() != 0 {
		t.Fatalf("after a failed proposal: step %s with %d attempts, %d deadlines", s.Status, len(s.Attempts), f.deadlines.Armed())
	}

	task := f.pollOne("model")
	s := f.step(st.Id)
	if s.Status != running || len(s.Attempts) != 1 {
		t.Fatalf("step %s with %d attempts; want running attempt 1", s.Status, len(s.Attempts))
	}
	at := s.Attempts[0]
	want := &fsmpb.AttemptRef{StepId: st.Id, Attempt: 1, Token: at.Token}
	if task.Ref.StepId != want.StepId || task.Ref.Attempt != 1 || task.Ref.Token != at.Token || task.Ref.Seq != 0 {
		t.Fatalf("task ref %v; want %v", task.Ref, want)
	}
	if at.WorkerId != "model" || at.Epoch != f.epoch || task.Epoch != f.epoch {
		t.Fatalf("attempt on %s epoch %d, task epoch %d; want model, %d", at.WorkerId, at.Epoch, task.Epoch, f.epoch)
	}
	if task.Kind != dexv1.StepKind_STEP_KIND_RUN_MODEL || task.SessionId != "s1" ||
		task.Runner != dexv1.TaskRunner_TASK_RUNNER_MODEL || task.Handler != dexv1.TaskHandler_TASK_HANDLER_MODEL {
		t.Fatalf("task kind %s session %s runner %s handler %s", task.Kind, task.SessionId, task.Runner, task.Handler)
	}
	if task.HeartbeatTimeoutMs != uint32(time.Minute.Milliseconds()) || task.HeartbeatIntervalMs != uint32((time.Minute/5).Milliseconds()) {
		t.Fatalf("heartbeat %d/%d ms", task.HeartbeatIntervalMs, task.HeartbeatTimeoutMs)
	}
	in := task.ModelInput
	if len(in.History) != 1 || in.History[0].Text != "hello" || in.Compact {
		t.Fatalf("model input history %v compact %v", in.History, in.Compact)
	}
	var names []string
	for _, tool := range in.Tools {
		names = append(names, tool.Name)
	}
	if want := []string{"ask_user", "lookup", "resume_agent", "save_note", "sleep"}; !slices.Equal(names, want) {
		t.Fatalf("model tools %v; want %v", names, want)
	}
	if f.deadlines.Armed() != 1 {
		t.Fatalf("armed deadlines %d; want 1", f.deadlines.Armed())
	}
	if n := f.c.Count("StartAttempt"); n != 2 {
		t.Fatalf("%d StartAttempt proposals; want the failed one and the committed one", n)
	}
	// Nothing else is queued for the model Worker: an empty poll.
	if tasks := f.poll("model", 1, 0); len(tasks) != 0 {
		t.Fatalf("second poll got %d tasks", len(tasks))
	}
}

func TestToolTaskCarriesCallAndIdempotencyKey(t *testing.T) {
	f := newFixture(t, options{})
	f.toolSession("s1", leasetest.Call("c1", "save_note", `{"text": "x"}`))
	task := f.pollOne("w1")
	if task.Kind != dexv1.StepKind_STEP_KIND_CALL_TOOL || task.Tool != "save_note" || task.CallId != "c1" ||
		task.Arguments != `{"text": "x"}` || task.Access != dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE ||
		task.IdempotencyKey != fsm.IdempotencyKey("s1", "c1") || task.ModelInput != nil ||
		task.Runner != dexv1.TaskRunner_TASK_RUNNER_TOOL || task.Handler != dexv1.TaskHandler_TASK_HANDLER_TOOL {
		t.Fatalf("tool task %v", task)
	}
	// The model Worker registered no tool: it gets nothing.
	if tasks := f.poll("model", 1, 0); len(tasks) != 0 {
		t.Fatalf("model worker got a tool task")
	}
}

func TestCompactionAndHistoryFromLatestSummary(t *testing.T) {
	f := newFixture(t, options{})
	f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: "s1", CompactionThreshold: 5, MessageId: "m0", Message: "a long first message",
	}}})
	// Nothing came before the first message: nothing to compact.
	first := f.pollOne("model")
	if first.Kind != dexv1.StepKind_STEP_KIND_RUN_MODEL {
		t.Fatalf("first task %s; want RunModel", first.Kind)
	}
	f.c.Complete(&fsmpb.AttemptRef{StepId: first.Ref.StepId, Attempt: 1, Token: first.Ref.Token, Seq: 1}, "an answer")
	f.c.Send("s1", "m1", "the next question")
	task := f.pollOne("model")
	h := task.ModelInput.GetHistory()
	if task.Kind != dexv1.StepKind_STEP_KIND_COMPACT_CONTEXT || !task.ModelInput.GetCompact() || len(h) != 2 ||
		task.Runner != dexv1.TaskRunner_TASK_RUNNER_MODEL || task.Handler != dexv1.TaskHandler_TASK_HANDLER_COMPACT ||
		h[0].Text != "a long first message" || h[1].Text != "an answer" {
		t.Fatalf("compaction task %v; want the first turn only", task)
	}
	f.c.Report(&fsmpb.AttemptRef{StepId: task.Ref.StepId, Attempt: 1, Token: task.Ref.Token},
		&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Summary{Summary: "the user asked something long"}})
	task = f.pollOne("model")
	h = task.ModelInput.GetHistory()
	if task.Kind != dexv1.StepKind_STEP_KIND_RUN_MODEL || len(h) != 2 || h[0].Kind != dexv1.HistoryKind_HISTORY_KIND_SUMMARY ||
		h[1].Text != "the next question" {
		t.Fatalf("RunModel after compaction: kind %s history %v; want the summary, then the turn's message", task.Kind, h)
	}
}

func TestUnknownWorker(t *testing.T) {
	f := newFixture(t, options{})
	if _, err := f.d.Poll(context.Background(), "ghost", 1, 0); !errors.Is(err, dispatch.ErrUnknownWorker) {
		t.Fatalf("poll of an unknown worker: %v; want ErrUnknownWorker", err)
	}
}

func TestEmptyPollWaitsForQueuedStep(t *testing.T) {
	f := newFixture(t, options{})
	if tasks := f.poll("model", 1, 10*time.Millisecond); len(tasks) != 0 {
		t.Fatalf("empty poll returned %d tasks", len(tasks))
	}
	type result struct {
		tasks []*dexv1.Task
		err   error
	}
	got := make(chan result, 1)
	go func() {
		tasks, err := f.d.Poll(context.Background(), "model", 1, 5*time.Second)
		got <- result{tasks, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("poll returned before anything was queued: %v %v", r.tasks, r.err)
	case <-time.After(20 * time.Millisecond):
	}
	f.c.CreateSession("s1", "a message arrives")
	r := <-got
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0].SessionId != "s1" {
		t.Fatalf("waiting poll = %v, %v; want the new RunModel task", r.tasks, r.err)
	}
}

// A queued Step in its retry backoff is handed out when the backoff ends,
// without any other change of the state.
func TestPollWaitsOutRetryBackoff(t *testing.T) {
	f := newFixture(t, options{})
	f.c.CreateSession("s1", "hi")
	task := f.pollOne("model")
	f.c.Fail(fsmpb.AttemptRefFromAPI(task.Ref), fsmpb.ErrorType_ERROR_TYPE_OVERLOADED, "busy")
	st := f.step(task.Ref.StepId)
	if st.Status != queued || st.ReadyAtMs <= time.Now().UnixMilli() {
		t.Fatalf("step %s ready at %d; want queued with a backoff", st.Status, st.ReadyAtMs)
	}
	tasks := f.poll("model", 1, 5*time.Second) // waits out the backoff (one second)
	if len(tasks) != 1 || tasks[0].Ref.Attempt != 2 {
		t.Fatalf("poll after the backoff: %v; want attempt 2", tasks)
	}
}

// One session with 1,000 queued tool calls does not starve another.
func TestFairAcrossSessions(t *testing.T) {
	f := newFixture(t, options{})
	f.toolSession("a", lookups("a", 1000)...)
	f.toolSession("b", lookups("b", 1)...)
	if n := len(f.c.Queued("a")); n != 1000 {
		t.Fatalf("session a has %d queued steps; want 1000", n)
	}
	servedB := -1
	for i := 0; i < 4 && servedB < 0; i++ {
		if task := f.pollOne("w1"); task.SessionId == "b" {
			servedB = i
		}
	}
	if servedB < 0 {
		t.Fatal("session b was not served within the first 4 polls")
	}

	// A batch poll takes from every session with work in turn.
	f.toolSession("c", lookups("c", 2)...)
	seen := map[string]int{}
	for _, task := range f.poll("w2", 4, 0) {
		seen[task.SessionId]++
	}
	if seen["c"] != 2 || seen["a"] != 2 {
		t.Fatalf("batch of 4 took %v; want 2 from a and 2 from c", seen)
	}
}

// The parallel tool calls of one session go to several pollers at once.
func TestParallelCallsToSeveralPollers(t *testing.T) {
	f := newFixture(t, options{})
	f.toolSession("s1", lookups("c", 4)...)
	var wg sync.WaitGroup
	tasks := make([]*dexv1.Task, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := f.d.Poll(context.Background(), fmt.Sprintf("w%d", i+1), 1, time.Second)
			if err != nil || len(got) != 1 {
				t.Errorf("poller %d: %d tasks, %v", i+1, len(got), err)
				return
			}
			tasks[i] = got[0]
		}()
	}
	wg.Wait()
	steps := map[string]bool{}
	for _, task := range tasks {
		if task != nil {
			steps[task.Ref.StepId] = true
		}
	}
	if len(steps) != 4 {
		t.Fatalf("4 pollers got %d distinct steps; want 4", len(steps))
	}
	for id := range steps {
		if st := f.step(id); st.Status != running || len(st.Attempts) != 1 {
			t.Fatalf("step %s is %s with %d attempts", id, st.Status, len(st.Attempts))
		}
	}
	if f.deadlines.Armed() != 4 {
		t.Fatalf("armed %d; want 4", f.deadlines.Armed())
	}
}

// A task whose Worker never heartbeats is expired and its Step requeued.
func TestUnheartbeatedTaskExpires(t *testing.T) {
	f := newFixture(t, options{heartbeatTimeout: 30 * time.Millisecond})
	f.toolSession("s1", leasetest.Call("c1", "lookup", "{}"))
	task := f.pollOne("w1")
	leasetest.Eventually(t, "the step is requeued", func() bool {
		st := f.step(task.Ref.StepId)
		return st.Status == queued && st.Attempts[0].Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_EXPIRED
	})
	if n := f.c.Count("ExpireAttempt"); n != 1 {
		t.Fatalf("%d ExpireAttempt proposals; want 1", n)
	}
}

// A timer that came due while there was no leader fires right after the next
// leader starts, and exactly once, even across another takeover.
func TestDueTimerFiresExactlyOnce(t *testing.T) {
	clock := leasetest.NewClock()
	f := newFixture(t, options{clock: clock, noEstablish: true})
	f.epoch = f.c.BumpEpoch()
	f.toolSession("s1", leasetest.Call("c1", "sleep", `{"seconds": 60}`), leasetest.Call("c2", "sleep", `{"seconds": 120}`))
	var timers []string
	for _, st := range f.c.State().Steps("s1") {
		if st.Kind == fsmpb.StepKind_STEP_KIND_AWAIT_TIMER {
			timers = append(timers, st.Id)
		}
	}
	clock.Advance(90 * time.Second) // the first came due during the outage

	f.establish()
	leasetest.Eventually(t, "the due timer fires", func() bool { return f.step(timers[0]).Status == done })
	if st := f.step(timers[1]); st.Status == done {
		t.Fatal("a timer fired before it was due")
	}
	clock.Advance(time.Minute)
	f.c.CreateSession("poke", "") // a state change wakes the wheel
	leasetest.Eventually(t, "the second timer fires", func() bool { return f.step(timers[1]).Status == done })
	leasetest.Eventually(t, "the turn moves on", func() bool {
		return f.c.State().Session("s1").Turn.StepId != ""
	})

	// Another takeover and more state changes: no timer fires again.
	f.leader.RevokeLeadership()
	f.establish()
	f.c.CreateSession("poke2", "")
	f.pollOne("model") // the tool-result turn's RunModel
	for _, cmd := range f.c.Proposals("FireTimer") {
		if cmd.GetFireTimer().StepId != timers[0] && cmd.GetFireTimer().StepId != timers[1] {
			t.Fatalf("unexpected FireTimer %v", cmd)
		}
	}
	if n := f.c.Count("FireTimer"); n != 2 {
		t.Fatalf("%d FireTimer proposals; want 2 (one per timer)", n)
	}
}

// An errored session is resumed when its error-resume backoff comes due.
func TestResumeErroredWhenDue(t *testing.T) {
	clock := leasetest.NewClock()
	f := newFixture(t, options{clock: clock})
	f.c.CreateSession("s1", "hi")
	for i := 0; i < fsm.ModelMaxAttempts; i++ {
		st := f.c.Queued("s1")[0]
		at := f.c.Start(st.Id, "model")
		f.c.Fail(leasetest.Ref(st.Id, at), fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down")
	}
	s := f.c.State().Session("s1")
	if s.Status != fsmpb.SessionStatus_SESSION_STATUS_ERRORED || s.ResumeAtMs == 0 {
		t.Fatalf("session %s resume at %d; want errored with a resume scheduled", s.Status, s.ResumeAtMs)
	}
	f.c.CreateSession("poke", "")
	if n := f.c.Count("ResumeErrored"); n != 0 {
		t.Fatalf("ResumeErrored proposed %d times before it was due", n)
	}
	clock.Advance(time.Duration(s.ResumeAtMs-clock.Now().UnixMilli()) * time.Millisecond)
	f.c.CreateSession("poke2", "")
	leasetest.Eventually(t, "the session resumes", func() bool {
		return f.c.State().Session("s1").Status == fsmpb.SessionStatus_SESSION_STATUS_RUNNING
	})
	if n := f.c.Count("ResumeErrored"); n != 1 {
		t.Fatalf("%d ResumeErrored proposals; want 1", n)
	}
	if len(f.c.Queued("s1")) != 1 {
		t.Fatal("the resumed session has no queued RunModel")
	}
}

// The new leader's recovery retries errored sessions (session_restarted).
func TestEstablishRestartsErroredSessions(t *testing.T) {
	f := newFixture(t, options{})
	if n := f.c.Count("RestartSessions"); n != 1 {
		t.Fatalf("%d RestartSessions proposals; want 1", n)
	}
	if got := f.c.Proposals("RestartSessions")[0].GetRestartSessions().Epoch; got != f.epoch {
		t.Fatalf("RestartSessions epoch %d; want %d", got, f.epoch)
	}
}

func TestEstablishFailsWhenRecoveryCannotCommit(t *testing.T) {
	f := newFixture(t, options{noEstablish: true})
	epoch := f.c.BumpEpoch()
	f.c.FailNext("RestartSessions", 1)
	if err := f.leader.EstablishLeadership(context.Background(), epoch); err == nil {
		t.Fatal("establish succeeded without its recovery")
	}
	if _, err := f.d.Poll(context.Background(), "model", 1, 0); !errors.Is(err, dispatch.ErrNotLeader) {
		t.Fatalf("poll after a failed establish: %v; want ErrNotLeader", err)
	}
	if f.deadlines.Epoch() != 0 {
		t.Fatal("deadlines stay established after a failed establish")
	}
}

// Revoke ends every open poll with ErrNotLeader at once, and nothing is
// proposed afterwards.
func TestRevokeEndsOpenPolls(t *testing.T) {
	f := newFixture(t, options{heartbeatTimeout: 30 * time.Millisecond})
	f.toolSession("s1", leasetest.Call("c1", "lookup", "{}"))
	running := f.pollOne("w1") // its deadline would pass after the revoke

	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := f.d.Poll(context.Background(), "model", 1, 5*time.Second)
			errs <- err
		}()
	}
	time.Sleep(10 * time.Millisecond) // let the polls open
	f.leader.RevokeLeadership()
	for range 3 {
		if err := <-errs; !errors.Is(err, dispatch.ErrNotLeader) {
			t.Fatalf("open poll ended with %v; want ErrNotLeader", err)
		}
	}
	if _, err := f.d.Poll(context.Background(), "w1", 1, time.Second); !errors.Is(err, dispatch.ErrNotLeader) {
		t.Fatalf("poll after revoke: %v; want ErrNotLeader", err)
	}

	before := len(f.c.Proposals(""))
	f.c.CreateSession("s2", "queued after revoke")
	f.toolSession("s3", leasetest.Call("c1", "sleep", `{"seconds": 0}`))
	time.Sleep(60 * time.Millisecond) // past the old heartbeat deadline
	for _, cmd := range f.c.Proposals("")[before:] {
		switch leasetest.Kind(cmd) {
		case "CreateSession", "StartAttempt", "ReportAttempt":
			// the test's own, by hand
		default:
			t.Fatalf("%s proposed after revoke", leasetest.Kind(cmd))
		}
	}
	if st := f.c.Queued("s2"); len(st) != 1 || len(st[0].Attempts) != 0 {
		t.Fatal("a Step was dispatched after revoke")
	}
	for _, st := range f.c.State().Steps("s3") {
		if st.Kind == fsmpb.StepKind_STEP_KIND_AWAIT_TIMER && st.Status != fsmpb.StepStatus_STEP_STATUS_WAITING {
			t.Fatal("a timer fired after revoke")
		}
	}
	if at := f.step(running.Ref.StepId).Attempts[0]; at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
		t.Fatalf("attempt %s after revoke; want it left running for the next leader", at.Status)
	}
}

// Many concurrent pollers drain one session's parallel calls: every Step is
// started exactly once and no StartAttempt is proposed in vain.
func TestConcurrentPollersStartEachStepOnce(t *testing.T) {
	f := newFixture(t, options{})
	const calls = 200
	f.toolSession("s1", lookups("c", calls)...)
	before := f.c.Count("StartAttempt")
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				tasks, err := f.d.Poll(context.Background(), fmt.Sprintf("w%d", i%4+1), 3, 0)
				if err != nil {
					t.Errorf("poll: %v", err)
					return
				}
				if len(tasks) == 0 {
					return
				}
				mu.Lock()
				for _, task := range tasks {
					got[task.Ref.StepId]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != calls {
		t.Fatalf("%d distinct steps handed out; want %d", len(got), calls)
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("step %s handed out %d times", id, n)
		}
	}
	if n := f.c.Count("StartAttempt") - before; n != calls {
		t.Fatalf("%d StartAttempt proposals for %d steps", n, calls)
	}
}

// Drain ends open polls and hands out nothing more, and a running attempt
// whose heartbeats stop is not expired by the draining node, while its
// heartbeat is still answered and its result still commits.
func TestDrainStopsDispatchAndExpiresNothing(t *testing.T) {
	f := newFixture(t, options{heartbeatTimeout: 30 * time.Millisecond})
	f.toolSession("s1", leasetest.Call("c1", "lookup", "{}"), leasetest.Call("c2", "lookup", "{}"))
	first := f.pollOne("w1")
	second := f.pollOne("w2")

	errs := make(chan error, 1)
	go func() {
		_, err := f.d.Poll(context.Background(), "model", 1, 5*time.Second)
		errs <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the poll open
	f.leader.Drain()
	if err := <-errs; !errors.Is(err, dispatch.ErrNotLeader) {
		t.Fatalf("open poll ended with %v; want ErrNotLeader", err)
	}
	f.c.CreateSession("s2", "queued while draining")
	if _, err := f.d.Poll(context.Background(), "model", 1, time.Second); !errors.Is(err, dispatch.ErrNotLeader) {
		t.Fatalf("poll while draining: %v; want ErrNotLeader", err)
	}

	time.Sleep(100 * time.Millisecond) // well past both deadlines' deadlines
	if cancelled, reason := f.deadlines.Heartbeat(first.Ref); cancelled {
		t.Fatalf("heartbeat while draining cancelled: %s", reason)
	}
	f.c.CompleteTool(fsmpb.AttemptRefFromAPI(first.Ref), "found")
	if n := f.c.Count("ExpireAttempt"); n != 0 {
		t.Fatalf("%d ExpireAttempt proposals while draining; want 0", n)
	}
	if at := f.step(first.Ref.StepId).Attempts[0]; at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED {
		t.Fatalf("completed attempt %s; want succeeded", at.Status)
	}
	if at := f.step(second.Ref.StepId).Attempts[0]; at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
		t.Fatalf("silent attempt %s; want it left running for the next leader", at.Status)
	}
	if st := f.c.Queued("s2"); len(st) != 1 || len(st[0].Attempts) != 0 {
		t.Fatal("a Step was dispatched while draining")
	}
}

// Every kind a Worker runs reaches it with its runner and handler, as the
// kind table says; a wait carries neither.
func TestTaskRouteFollowsTheKindTable(t *testing.T) {
	want := map[fsmpb.StepKind][2]string{
		fsmpb.StepKind_STEP_KIND_RUN_MODEL:                {"TASK_RUNNER_MODEL", "TASK_HANDLER_MODEL"},
		fsmpb.StepKind_STEP_KIND_COMPACT_CONTEXT:          {"TASK_RUNNER_MODEL", "TASK_HANDLER_COMPACT"},
		fsmpb.StepKind_STEP_KIND_CALL_TOOL:                {"TASK_RUNNER_TOOL", "TASK_HANDLER_TOOL"},
		fsmpb.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL: {"TASK_RUNNER_TOOL", "TASK_HANDLER_TOOL"},
		fsmpb.StepKind_STEP_KIND_POLL_TOOL_TASK:           {"TASK_RUNNER_TOOL", "TASK_HANDLER_POLL"},
	}
	for n := range fsmpb.StepKind_name {
		k := fsmpb.StepKind(n)
		r, h := dispatch.TaskRoute(k)
		got := [2]string{r.String(), h.String()}
		w, dispatched := want[k]
		if !dispatched {
			w = [2]string{"TASK_RUNNER_UNSPECIFIED", "TASK_HANDLER_UNSPECIFIED"}
		}
		if got != w || dispatched != fsm.Kind(k).Dispatched() {
			t.Errorf("%s: runner %s handler %s (dispatched %v); want %s %s", k, got[0], got[1], fsm.Kind(k).Dispatched(), w[0], w[1])
		}
	}
}
