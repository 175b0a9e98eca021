package dispatch

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

// brokerFixture is a broker on an in-process cluster with a stopped clock,
// fed from every applied entry. Its delay heap is moved by hand (promote).
type brokerFixture struct {
	t     *testing.T
	c     *leasetest.Cluster
	clock *leasetest.Clock
	b     *Broker
}

var (
	modelKeys  = []queueKey{{model: true}}
	lookupKeys = []queueKey{{tool: "lookup"}}
)

// newBrokerFixture registers a model Worker and a lookup Worker, opens an
// epoch, runs prepare on the state and then builds the broker from it.
func newBrokerFixture(t *testing.T, prepare func(*leasetest.Cluster, *leasetest.Clock)) *brokerFixture {
	return newLimitedFixture(t, prepare, nil)
}

// newLimitedFixture is newBrokerFixture with providers' limits.
func newLimitedFixture(t *testing.T, prepare func(*leasetest.Cluster, *leasetest.Clock), limits map[string]ProviderLimit) *brokerFixture {
	clock := leasetest.NewClock()
	c := leasetest.New(t)
	c.Now = clock.Now
	c.RegisterWorker("model", true)
	c.RegisterWorker("w1", false, leasetest.Lookup)
	epoch := c.BumpEpoch()
	if prepare != nil {
		prepare(c, clock)
	}
	f := &brokerFixture{t: t, c: c, clock: clock}
	f.b = newBroker(c, epoch, clock.Now, zaptest.NewLogger(t), limits)
	c.OnApplied(f.b.Applied)
	f.b.start()
	t.Cleanup(f.b.Stop)
	return f
}

// toolTurn creates a session whose model output calls lookup n times.
func toolTurn(t *testing.T, c *leasetest.Cluster, id string, n int) {
	t.Helper()
	calls := make([]*fsmpb.ToolCall, n)
	for i := range calls {
		calls[i] = leasetest.Call(fmt.Sprintf("%s-c%d", id, i), "lookup", "{}")
	}
	modelTurn(t, c, id, calls...)
}

func modelTurn(t *testing.T, c *leasetest.Cluster, id string, calls ...*fsmpb.ToolCall) {
	t.Helper()
	c.CreateSession(id, "go")
	st := c.Queued(id)[0]
	at := c.Start(st.Id, "model")
	c.Complete(leasetest.Ref(st.Id, at), "calling", calls...)
}

// errored makes a session errored with a resume scheduled.
func errored(t *testing.T, c *leasetest.Cluster, id string) *fsmpb.Session {
	t.Helper()
	c.CreateSession(id, "hi")
	for range fsm.ModelMaxAttempts {
		st := c.Queued(id)[0]
		at := c.Start(st.Id, "model")
		c.Fail(leasetest.Ref(st.Id, at), fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down")
	}
	s := c.State().Session(id)
	if s.Status != fsmpb.SessionStatus_SESSION_STATUS_ERRORED || s.ResumeAtMs == 0 {
		t.Fatalf("session %s is %s, resume at %d; want errored with a resume", id, s.Status, s.ResumeAtMs)
	}
	return s
}

func (f *brokerFixture) take(keys []queueKey, max int) []*fsmpb.Step {
	f.t.Helper()
	steps, _, err := f.b.take(keys, max, nil, false)
	if err != nil {
		f.t.Fatalf("take: %v", err)
	}
	return steps
}

// promote moves the delay heap to the clock's time, as its goroutine does.
func (f *brokerFixture) promote() {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	f.b.promoteDue(f.clock.Now().UnixMilli())
}

func sessionsOf(steps []*fsmpb.Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.SessionId)
	}
	return out
}

func (f *brokerFixture) owed() map[string]string {
	out := map[string]string{}
	for _, d := range f.b.Owed() {
		out[d.id] = d.kind
	}
	return out
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Sessions take turns, least recently served first; within a session Steps
// go in queue order.
func TestBrokerOrderAndFairness(t *testing.T) {
	f := newBrokerFixture(t, nil)
	toolTurn(t, f.c, "a", 3)
	toolTurn(t, f.c, "b", 2)

	got := f.take(lookupKeys, 5)
	if want := []string{"a", "b", "a", "b", "a"}; fmt.Sprint(sessionsOf(got)) != fmt.Sprint(want) {
		t.Fatalf("took sessions %v; want %v", sessionsOf(got), want)
	}
	for i := 2; i < len(got); i++ {
		if got[i].SessionId == got[i-2].SessionId && got[i].QueueSeq < got[i-2].QueueSeq {
			t.Fatalf("session %s out of queue order", got[i].SessionId)
		}
	}

	// A session served last waits behind one never served.
	toolTurn(t, f.c, "c", 2)
	toolTurn(t, f.c, "d", 1)
	if got := sessionsOf(f.take(lookupKeys, 1)); got[0] != "c" {
		t.Fatalf("took %v; want c, created first of the unserved", got)
	}
	if got := sessionsOf(f.take(lookupKeys, 1)); got[0] != "d" {
		t.Fatalf("took %v; want d, never served", got)
	}
	if got := sessionsOf(f.take(lookupKeys, 1)); got[0] != "c" {
		t.Fatalf("took %v; want c", got)
	}
	if got := f.take(lookupKeys, 1); len(got) != 0 {
		t.Fatalf("took %v from empty queues", sessionsOf(got))
	}
}

// A Worker takes only from its queues: the model's, or its tools'.
func TestBrokerQueuesFollowTheWorker(t *testing.T) {
	f := newBrokerFixture(t, nil)
	toolTurn(t, f.c, "s1", 1)
	f.c.CreateSession("s2", "hello")
	if got := f.take([]queueKey{{tool: "save_note"}}, 5); len(got) != 0 {
		t.Fatalf("a save_note Worker took %v", got)
	}
	got := f.take(modelKeys, 5)
	if len(got) != 1 || got[0].Kind != fsmpb.StepKind_STEP_KIND_RUN_MODEL || got[0].SessionId != "s2" {
		t.Fatalf("the model Worker took %v; want s2's RunModel", got)
	}
	got = f.take(lookupKeys, 5)
	if len(got) != 1 || got[0].Tool != "lookup" {
		t.Fatalf("the lookup Worker took %v; want the lookup call", got)
	}
	w := &fsmpb.WorkerInfo{RunsModel: true, Tools: []*fsmpb.ToolSpec{leasetest.Lookup, leasetest.Lookup, leasetest.SaveNote}}
	if keys := workerKeys(w); len(keys) != 3 {
		t.Fatalf("worker keys %v; want model, lookup and save_note once each", keys)
	}
}

// Steps in their backoff, timers and error resumes sit in the delay heap
// until they come due; only then are they ready or owed.
func TestBrokerDelayHeap(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.CreateSession("s1", "hi")
	st := f.c.Queued("s1")[0]
	at := f.c.Start(st.Id, "model")
	f.c.Fail(leasetest.Ref(st.Id, at), fsmpb.ErrorType_ERROR_TYPE_OVERLOADED, "busy")
	if got := f.take(modelKeys, 5); len(got) != 0 {
		t.Fatalf("took %v before its backoff ended", sessionsOf(got))
	}
	_, w, _ := f.b.take(modelKeys, 1, nil, true)
	ready := f.c.State().Step(st.Id).ReadyAtMs
	f.clock.Advance(time.Duration(ready-f.clock.Now().UnixMilli()-1) * time.Millisecond)
	f.promote()
	if closed(w.ch) {
		t.Fatal("a waiting poll was woken before the backoff ended")
	}
	f.clock.Advance(time.Millisecond)
	f.promote()
	if !closed(w.ch) {
		t.Fatal("a waiting poll was not woken when the backoff ended")
	}
	if got := f.take(modelKeys, 5); len(got) != 1 || got[0].Id != st.Id {
		t.Fatalf("after the backoff took %v; want %s", got, st.Id)
	}

	modelTurn(t, f.c, "sleeper", leasetest.Call("c1", "sleep", `{"seconds": 30}`))
	if len(f.owed()) != 0 {
		t.Fatalf("owed %v before the timer came due", f.owed())
	}
	f.clock.Advance(30 * time.Second)
	f.promote()
	if got := f.owed(); len(got) != 1 || !hasKind(got, dueTimer) {
		t.Fatalf("owed %v after 30s; want the timer only", got)
	}
	if !closed(f.b.owedCh) {
		t.Fatal("the timer wheel was not told the timer came due")
	}

	s := errored(t, f.c, "e1")
	if got := f.owed(); hasKind(got, dueResume) {
		t.Fatalf("owed %v before the resume came due", got)
	}
	f.clock.Advance(time.Duration(s.ResumeAtMs-f.clock.Now().UnixMilli()) * time.Millisecond)
	f.promote()
	if got := f.owed(); got["e1"] != dueResume {
		t.Fatalf("owed %v; want e1's resume", got)
	}
}

func hasKind(owed map[string]string, kind string) bool {
	for _, k := range owed {
		if k == kind {
			return true
		}
	}
	return false
}

// Each command updates the broker through the rows it wrote: new Steps are
// queued, started ones leave, a fired timer and a resumed session are no
// longer owed.
func TestBrokerIncrementalUpdate(t *testing.T) {
	f := newBrokerFixture(t, nil)
	toolTurn(t, f.c, "s1", 2)
	if n := len(f.b.ready); n != 2 {
		t.Fatalf("%d ready Steps after the model output; want its 2 calls", n)
	}
	f.c.Start(f.c.Queued("s1")[0].Id, "w1") // started by another hand than the broker
	if n := len(f.b.ready); n != 1 {
		t.Fatalf("%d ready Steps after a start; want 1", n)
	}

	modelTurn(t, f.c, "sleeper", leasetest.Call("c1", "sleep", `{"seconds": 0}`))
	s := errored(t, f.c, "e1")
	f.clock.Advance(time.Duration(s.ResumeAtMs-f.clock.Now().UnixMilli()) * time.Millisecond)
	f.promote()
	owed := f.b.Owed()
	if len(owed) != 2 {
		t.Fatalf("owed %v; want the timer and the resume", owed)
	}
	for _, o := range owed {
		cmd := &fsmpb.Command{Body: &fsmpb.Command_FireTimer{FireTimer: &fsmpb.FireTimer{StepId: o.id, Epoch: f.c.Epoch()}}}
		if o.kind == dueResume {
			cmd.Body = &fsmpb.Command_ResumeErrored{ResumeErrored: &fsmpb.ResumeErrored{SessionId: o.id, Epoch: f.c.Epoch()}}
		}
		f.c.Do(cmd)
	}
	if got := f.owed(); len(got) != 0 {
		t.Fatalf("owed %v after the fire and the resume; want nothing", got)
	}
	// The resumed session's RunModel and the timer's tool-result turn are ready.
	got := f.take(modelKeys, 5)
	if fmt.Sprint(sessionsOf(got)) != "[sleeper e1]" && fmt.Sprint(sessionsOf(got)) != "[e1 sleeper]" {
		t.Fatalf("model Steps ready %v; want sleeper's and e1's", sessionsOf(got))
	}
}

// A new broker loads what is queued, waiting and errored from the state.
func TestBrokerLoadsOnEstablish(t *testing.T) {
	var resumeAt int64
	f := newBrokerFixture(t, func(c *leasetest.Cluster, clock *leasetest.Clock) {
		toolTurn(t, c, "s1", 2)
		modelTurn(t, c, "sleeper", leasetest.Call("c1", "sleep", `{"seconds": 0}`))
		modelTurn(t, c, "later", leasetest.Call("c1", "sleep", `{"seconds": 60}`))
		resumeAt = errored(t, c, "e1").ResumeAtMs
		c.CreateSession("idle", "")
	})
	if got := f.take(lookupKeys, 5); len(got) != 2 {
		t.Fatalf("took %d lookups; want the 2 queued before the broker started", len(got))
	}
	if got := f.owed(); len(got) != 1 || !hasKind(got, dueTimer) {
		t.Fatalf("owed %v; want the due timer", got)
	}
	if n := len(f.b.delay); n != 2 {
		t.Fatalf("%d delayed items; want the later timer and the resume", n)
	}
	if f.b.delay[0].at > resumeAt {
		t.Fatal("the delay heap is not ordered by due time")
	}

	// A restore rebuilds it from the state.
	f.b.mu.Lock()
	f.b.owed = map[dueKey]due{}
	f.b.mu.Unlock()
	f.b.Applied(&fsm.Applied{Restored: true})
	if got := f.owed(); len(got) != 1 {
		t.Fatalf("owed %v after a restore; want the due timer again", got)
	}
}

// A poll waiting on the model's queue is woken by a RunModel that becomes
// ready, not by entries that queue nothing it takes.
func TestBrokerWaiterWokenOnlyByItsQueues(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.CreateSession("tools", "go")
	run := f.c.Queued("tools")[0]
	at := f.c.Start(run.Id, "model") // by hand: the broker hands out nothing here

	_, w, err := f.b.take(modelKeys, 1, nil, true)
	if err != nil || w == nil {
		t.Fatalf("an empty take registered no waiter: %v", err)
	}
	f.c.CreateSession("idle", "")
	f.c.RegisterWorker("w2", false, leasetest.SaveNote)
	f.c.Complete(leasetest.Ref(run.Id, at), "calling", leasetest.Call("c1", "lookup", "{}"))
	if len(f.b.ready) != 1 {
		t.Fatalf("%d ready Steps; want the lookup call", len(f.b.ready))
	}
	if closed(w.ch) {
		t.Fatal("the waiter was woken by entries that queued nothing it takes")
	}
	f.c.CreateSession("next", "hello")
	if !closed(w.ch) {
		t.Fatal("the waiter was not woken by a RunModel that became ready")
	}
	if n := len(f.b.queues[queueKey{model: true}].waiters); n != 0 {
		t.Fatalf("%d waiters left on the queue after the wake", n)
	}

	// A waiter whose poll ends is dropped from its queues.
	f.take(lookupKeys, 1)
	_, w, _ = f.b.take(lookupKeys, 1, nil, true)
	f.b.drop(w)
	if n := len(f.b.queues[queueKey{tool: "lookup"}].waiters); n != 0 {
		t.Fatalf("%d waiters left after drop", n)
	}
}

// A newer epoch ends every waiting poll and every take.
func TestBrokerDeposedByNewerEpoch(t *testing.T) {
	f := newBrokerFixture(t, nil)
	_, w, _ := f.b.take(modelKeys, 1, nil, true)
	f.c.BumpEpoch()
	if !closed(w.ch) {
		t.Fatal("a newer epoch did not wake the waiting poll")
	}
	if _, _, err := f.b.take(modelKeys, 1, nil, true); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("take after a newer epoch: %v; want ErrNotLeader", err)
	}
	if !closed(f.b.owedCh) {
		t.Fatal("the timer wheel was not woken to idle")
	}
}

// A Step in flight is out of the queues; released, it is placed as the
// state has it: gone if its attempt started, queued again if not.
func TestBrokerRelease(t *testing.T) {
	f := newBrokerFixture(t, nil)
	toolTurn(t, f.c, "s1", 2)
	got := f.take(lookupKeys, 2)
	if len(got) != 2 || len(f.b.ready) != 0 || len(f.b.inflight) != 2 {
		t.Fatalf("took %d, %d ready, %d in flight", len(got), len(f.b.ready), len(f.b.inflight))
	}
	f.c.Start(got[0].Id, "w1")
	f.b.release(got[0].Id)
	f.b.release(got[1].Id) // its StartAttempt was refused or failed
	if len(f.b.inflight) != 0 || len(f.b.ready) != 1 || f.b.ready[got[1].Id] == nil {
		t.Fatalf("after release: %d in flight, ready %v; want only %s", len(f.b.inflight), f.b.ready, got[1].Id)
	}
	// A Step refused twice to a poll is left for others.
	refused := map[string]int{got[1].Id: 2}
	if steps, _, _ := f.b.take(lookupKeys, 1, refused, false); len(steps) != 0 {
		t.Fatal("a Step refused twice was taken again by the same poll")
	}
	if got2 := f.take(lookupKeys, 1); len(got2) != 1 || got2[0].Id != got[1].Id {
		t.Fatal("a Step refused to one poll is not left for another")
	}
}

// Stop wakes every waiting poll and refuses every take.
func TestBrokerStop(t *testing.T) {
	f := newBrokerFixture(t, nil)
	_, w, _ := f.b.take(lookupKeys, 1, nil, true)
	f.b.Stop()
	if !closed(w.ch) {
		t.Fatal("Stop did not wake the waiting poll")
	}
	if _, _, err := f.b.take(lookupKeys, 1, nil, false); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("take after Stop: %v", err)
	}
	f.b.Stop() // twice is fine
}

func TestTakesFollowsTheQueues(t *testing.T) {
	model := &fsmpb.WorkerInfo{RunsModel: true}
	tools := &fsmpb.WorkerInfo{Tools: []*fsmpb.ToolSpec{leasetest.Lookup}}
	for _, c := range []struct {
		w    *fsmpb.WorkerInfo
		st   *fsmpb.Step
		want bool
	}{
		{model, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_RUN_MODEL}, true},
		{model, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_COMPACT_CONTEXT}, true},
		{model, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_CALL_TOOL, Tool: "lookup"}, false},
		{tools, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_CALL_TOOL, Tool: "lookup"}, true},
		{tools, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_POLL_TOOL_TASK, Tool: "lookup"}, true},
		{tools, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL, Tool: "send_email"}, false},
		{tools, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_RUN_MODEL}, false},
		{tools, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_AWAIT_TIMER, Tool: "lookup"}, false},
	} {
		if got := Takes(c.w, c.st); got != c.want {
			t.Errorf("Takes(model=%v, %s %s) = %v; want %v", c.w.RunsModel, c.st.Kind, c.st.Tool, got, c.want)
		}
	}
}
