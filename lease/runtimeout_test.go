package lease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/leasetest"
)

// Run timeouts on the fake clock: the attempt's Worker heartbeats on time
// all along, and the attempt still ends at its run deadline.

const runTimeout = 10 * timeout

var slowLookup = &fsmpb.ToolSpec{Name: "slow_lookup", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 2,
	RunTimeoutMs: uint32(runTimeout.Milliseconds())}

type runFixture struct {
	*fixture
	clock *leasetest.Clock
}

func newRunFixture(t *testing.T) *runFixture {
	c := leasetest.New(t)
	clock := leasetest.NewClock()
	c.Now = clock.Now
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: "w1", Tools: []*fsmpb.ToolSpec{slowLookup}, RunsModel: true, ModelRunTimeoutMs: uint32(runTimeout.Milliseconds()),
	}}})
	c.BumpEpoch()
	return &runFixture{fixture: &fixture{t: t, c: c, m: newManager(t, c, clock)}, clock: clock}
}

func newManager(t *testing.T, c *leasetest.Cluster, clock *leasetest.Clock) *lease.Deadlines {
	m := lease.NewDeadlines(c, c, lease.DeadlinesConfig{HeartbeatTimeout: timeout, HeartbeatInterval: timeout / 4, TakeoverGrace: timeout, Now: clock.Now}, zaptest.NewLogger(t))
	t.Cleanup(m.Revoke)
	return m
}

// startTool starts a session whose model calls slow_lookup, and the tool's
// first attempt, claimed.
func (f *runFixture) startTool(session string) *fsmpb.AttemptRef {
	f.t.Helper()
	f.c.CreateSession(session, "go")
	model := f.c.Queued(session)[0]
	f.c.Complete(leasetest.Ref(model.Id, f.c.Start(model.Id, "w1")), "", leasetest.Call("c1", "slow_lookup", "{}"))
	st := f.c.Queued(session)[0]
	ref := leasetest.Ref(st.Id, f.c.Start(st.Id, "w1"))
	f.claim(ref)
	return ref
}

func (f *runFixture) claim(ref *fsmpb.AttemptRef) {
	f.t.Helper()
	claim := &fsmpb.AttemptRef{StepId: ref.StepId, Attempt: ref.Attempt, Token: ref.Token, Seq: 1}
	f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{Ref: claim}}})
}

// heartbeatUntil heartbeats on time, moving the clock a quarter of the
// heartbeat timeout each time, until the reply says cancelled or the clock
// reaches end; it returns the reason.
func (f *runFixture) heartbeatUntil(m *lease.Deadlines, ref *fsmpb.AttemptRef, end time.Time) string {
	f.t.Helper()
	for f.clock.Now().Before(end) {
		if cancelled, reason := m.Heartbeat(workerRef(ref)); cancelled {
			return reason
		}
		f.clock.Advance(timeout / 4)
	}
	return ""
}

func (f *runFixture) timedOut(ref *fsmpb.AttemptRef) bool {
	at := f.attempt(ref)
	return at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_FAILED && at.ErrorType == fsmpb.ErrorType_ERROR_TYPE_TIMEOUT
}

func TestRunTimeout_AHeartbeatingAttemptIsCancelledAtItsDeadlineAndEnded(t *testing.T) {
	f := newRunFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startTool("s")
	f.m.Arm(ref.StepId, ref.Attempt)
	started := f.clock.Now()
	if d := f.attempt(ref).DeadlineMs; d != started.Add(runTimeout).UnixMilli() {
		t.Fatalf("stored deadline %d; want the start plus the tool's run timeout", d)
	}

	if reason := f.heartbeatUntil(f.m, ref, started.Add(runTimeout)); reason != "" {
		t.Fatalf("heartbeat cancelled before the run deadline: %s", reason)
	}
	cancelled, reason := f.m.Heartbeat(workerRef(ref))
	if !cancelled || !strings.Contains(reason, "ran past its run timeout of 400ms") {
		t.Fatalf("heartbeat at the run deadline = %v %q; want cancelled for the run timeout", cancelled, reason)
	}
	leasetest.Eventually(t, "the attempt times out", func() bool { return f.timedOut(ref) })
	at := f.attempt(ref)
	if !strings.Contains(at.Error, "ran past its run timeout of 400ms") || at.Progress != fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_COMPLETED {
		t.Fatalf("attempt: %q, %s", at.Error, at.Progress)
	}
	if st := f.c.State().Step(ref.StepId); st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("a read with attempts left is %s; want queued for attempt 2", st.Status)
	}
	if n, e := f.c.Count("TimeoutAttempt"), f.c.Count("ExpireAttempt"); n != 1 || e != 0 {
		t.Fatalf("%d TimeoutAttempt and %d ExpireAttempt proposals; want 1 and 0", n, e)
	}
	if to := f.c.Proposals("TimeoutAttempt")[0].GetTimeoutAttempt(); to.Epoch != f.c.Epoch() || to.StepId != ref.StepId || to.Attempt != 1 {
		t.Fatalf("TimeoutAttempt = %v", to)
	}
	leasetest.Eventually(t, "the lease is dropped", func() bool { return f.m.Armed() == 0 })
	if cancelled, reason := f.m.Heartbeat(workerRef(ref)); !cancelled || !strings.Contains(reason, "run timeout") {
		t.Fatalf("heartbeat after the timeout = %v %q; want cancelled, run timeout", cancelled, reason)
	}
}

// No heartbeat comes after the deadline: the deadline's own timer ends it.
func TestRunTimeout_TheDeadlineTimerEndsTheAttemptWithoutAHeartbeat(t *testing.T) {
	f := newRunFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startTool("s")
	f.m.Arm(ref.StepId, ref.Attempt)
	started := f.clock.Now()
	f.heartbeatUntil(f.m, ref, started.Add(runTimeout-timeout/4))
	f.m.Heartbeat(workerRef(ref)) // the heartbeat deadline is well after the run deadline
	f.clock.Advance(timeout / 2)  // past the run deadline
	leasetest.Eventually(t, "the attempt times out", func() bool { return f.timedOut(ref) })
	if e := f.c.Count("ExpireAttempt"); e != 0 {
		t.Fatalf("%d ExpireAttempt proposals; want none", e)
	}
}

// A single-attempt tool and a model Step end by their own rules.
func TestRunTimeout_EachPolicyDecidesAfterTheTimeout(t *testing.T) {
	f := newRunFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	f.c.CreateSession("m", "hello")
	model := f.c.Queued("m")[0]
	ref := leasetest.Ref(model.Id, f.c.Start(model.Id, "w1"))
	f.claim(ref)
	f.m.Arm(ref.StepId, ref.Attempt)
	f.heartbeatUntil(f.m, ref, f.clock.Now().Add(2*runTimeout))
	leasetest.Eventually(t, "the model attempt times out", func() bool { return f.timedOut(ref) })
	if st := f.c.State().Step(ref.StepId); st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("model Step after a timeout is %s; want queued (a timeout is retryable)", st.Status)
	}

	// The leader's default bounds a Step whose policy names none.
	once := &fsmpb.ToolSpec{Name: "charge", Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT}
	f.c.RegisterWorker("w2", false, once)
	f.c.CreateSession("s", "go")
	m := f.c.Queued("s")[0]
	f.c.Complete(leasetest.Ref(m.Id, f.c.Start(m.Id, "w1")), "", leasetest.Call("c1", "charge", "{}"))
	st := f.c.Queued("s")[0]
	res := f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: st.Id, Attempt: 1, WorkerId: "w2", Epoch: f.c.Epoch(), DefaultRunTimeoutMs: uint32(runTimeout.Milliseconds()),
	}}})
	ref = leasetest.Ref(st.Id, res.Attempt)
	f.claim(ref)
	f.m.Arm(ref.StepId, ref.Attempt)
	f.heartbeatUntil(f.m, ref, f.clock.Now().Add(2*runTimeout))
	leasetest.Eventually(t, "the single-attempt call times out", func() bool { return f.timedOut(ref) })
	st = f.c.State().Step(st.Id)
	if st.Outcome != fsmpb.Outcome_OUTCOME_UNKNOWN || !strings.Contains(st.Result, "run timeout") {
		t.Fatalf("single-attempt call records %s %q; want outcome_unknown", fsm.OutcomeName(st.Outcome), st.Result)
	}
}

// A new leader re-arms the run deadline stored with the attempt: the
// takeover gives the attempt no more time to run.
func TestRunTimeout_ANewLeaderRearmsTheStoredDeadline(t *testing.T) {
	f := newRunFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startTool("s")
	f.m.Arm(ref.StepId, ref.Attempt)
	started := f.clock.Now()
	f.heartbeatUntil(f.m, ref, started.Add(runTimeout/2))

	f.m.Revoke()
	epoch2 := f.c.BumpEpoch()
	m2 := newManager(t, f.c, f.clock)
	m2.Establish(context.Background(), epoch2)
	reason := f.heartbeatUntil(m2, ref, started.Add(2*runTimeout))
	if !strings.Contains(reason, "run timeout") || f.clock.Now().After(started.Add(runTimeout+timeout)) {
		t.Fatalf("cancelled at %s after the start with %q; want at the stored run deadline (%s)", f.clock.Now().Sub(started), reason, runTimeout)
	}
	leasetest.Eventually(t, "the attempt times out", func() bool { return f.timedOut(ref) })
	for _, cmd := range f.c.Proposals("TimeoutAttempt") {
		if cmd.GetTimeoutAttempt().Epoch != epoch2 {
			t.Fatalf("TimeoutAttempt from epoch %d; want the new leader's %d", cmd.GetTimeoutAttempt().Epoch, epoch2)
		}
	}
}
