package lease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/leasetest"
)

const timeout = 40 * time.Millisecond

type fixture struct {
	t *testing.T
	c *leasetest.Cluster
	m *lease.Deadlines
}

func newFixture(t *testing.T) *fixture {
	c := leasetest.New(t)
	c.RegisterWorker("w1", true, leasetest.Lookup)
	c.BumpEpoch()
	m := lease.NewDeadlines(c, c, lease.DeadlinesConfig{HeartbeatTimeout: timeout, HeartbeatInterval: timeout / 4, TakeoverGrace: timeout}, zaptest.NewLogger(t))
	t.Cleanup(m.Revoke)
	return &fixture{t: t, c: c, m: m}
}

// startModel creates a session and starts its RunModel Step.
func (f *fixture) startModel(session string) *fsmpb.AttemptRef {
	f.t.Helper()
	f.c.CreateSession(session, "hello")
	st := f.c.Queued(session)[0]
	return leasetest.Ref(st.Id, f.c.Start(st.Id, "w1"))
}

func (f *fixture) attempt(ref *fsmpb.AttemptRef) *fsmpb.Attempt {
	st := f.c.State().Step(ref.StepId)
	return st.Attempts[ref.Attempt-1]
}

func (f *fixture) expired(ref *fsmpb.AttemptRef) bool {
	return f.attempt(ref).Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_EXPIRED
}

func TestExpiryProposesExpireAttemptAndRequeues(t *testing.T) {
	f := newFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startModel("s1")
	f.m.Arm(ref.StepId, ref.Attempt)
	if f.m.Armed() != 1 {
		t.Fatalf("armed = %d; want 1", f.m.Armed())
	}
	leasetest.Eventually(t, "the attempt expires", func() bool { return f.expired(ref) })
	leasetest.Eventually(t, "the lease is dropped", func() bool { return f.m.Armed() == 0 })
	st := f.c.State().Step(ref.StepId)
	if st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED || len(st.Attempts) != 1 {
		t.Fatalf("step is %s with %d attempts; want queued for attempt 2", st.Status, len(st.Attempts))
	}
	exp := f.c.Proposals("ExpireAttempt")
	if len(exp) != 1 {
		t.Fatalf("%d ExpireAttempt proposals; want 1", len(exp))
	}
	if e := exp[0].GetExpireAttempt(); e.Epoch != f.c.Epoch() || e.StepId != ref.StepId || e.Attempt != 1 {
		t.Fatalf("ExpireAttempt = %v", e)
	}
	if got := f.attempt(ref).Progress; got != fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_STARTED {
		t.Fatalf("progress = %s; want NOT_STARTED (never claimed)", got)
	}
	if cancelled, reason := f.m.Heartbeat(workerRef(ref)); !cancelled || !strings.Contains(reason, "expired") {
		t.Fatalf("heartbeat of an expired attempt = %v %q; want cancelled, expired", cancelled, reason)
	}
}

func TestHeartbeatsKeepAttemptAlive(t *testing.T) {
	f := newFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startModel("s1")
	f.m.Arm(ref.StepId, ref.Attempt)
	for end := time.Now().Add(5 * timeout); time.Now().Before(end); time.Sleep(timeout / 8) {
		if cancelled, reason := f.m.Heartbeat(workerRef(ref)); cancelled {
			t.Fatalf("heartbeat cancelled: %s", reason)
		}
	}
	if f.expired(ref) || f.c.Count("ExpireAttempt") != 0 {
		t.Fatal("a heartbeated attempt expired")
	}
	f.c.Complete(ref, "done")
	f.m.Release(ref.StepId, ref.Attempt)
	if f.m.Armed() != 0 {
		t.Fatalf("armed = %d after release; want 0", f.m.Armed())
	}
	if cancelled, reason := f.m.Heartbeat(workerRef(ref)); !cancelled || !strings.Contains(reason, "completed") {
		t.Fatalf("heartbeat after completion = %v %q; want cancelled", cancelled, reason)
	}
}

func TestHeartbeatOfReplacedOrForeignAttemptIsCancelled(t *testing.T) {
	f := newFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startModel("s1")
	f.c.Fail(ref, fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down")
	st := f.c.State().Step(ref.StepId)
	if st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("step is %s; want queued for a retry", st.Status)
	}
	ref2 := leasetest.Ref(st.Id, f.c.Start(st.Id, "w1"))

	cases := []struct {
		name string
		ref  *fsmpb.AttemptRef
		want string
	}{
		{"replaced", ref, "replaced"},
		{"wrong token", &fsmpb.AttemptRef{StepId: ref2.StepId, Attempt: 2, Token: "bogus"}, "token"},
		{"future attempt", &fsmpb.AttemptRef{StepId: ref2.StepId, Attempt: 3, Token: ref2.Token}, "no such attempt"},
		{"unknown step", &fsmpb.AttemptRef{StepId: "nope", Attempt: 1}, "does not exist"},
		{"nil", nil, "no attempt"},
	}
	for _, c := range cases {
		cancelled, reason := f.m.Heartbeat(workerRef(c.ref))
		if !cancelled || !strings.Contains(reason, c.want) {
			t.Errorf("%s: heartbeat = %v %q; want cancelled with %q", c.name, cancelled, reason, c.want)
		}
	}
	if cancelled, reason := f.m.Heartbeat(workerRef(ref2)); cancelled {
		t.Fatalf("current attempt cancelled: %s", reason)
	}
	if f.m.Armed() != 1 {
		t.Fatalf("armed = %d; want the heartbeat to arm the current attempt", f.m.Armed())
	}
}

// An attempt started under one leader survives the takeover when its Worker
// heartbeats the new leader within the grace period, and expires otherwise.
func TestEstablishRearmsRunningAttemptsWithGrace(t *testing.T) {
	f := newFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	kept := f.startModel("kept")
	lost := f.startModel("lost")
	f.m.Arm(kept.StepId, kept.Attempt)
	f.m.Arm(lost.StepId, lost.Attempt)

	// The leader dies; a new one opens epoch 2 with its own attempt deadlines.
	f.m.Revoke()
	epoch2 := f.c.BumpEpoch()
	m2 := lease.NewDeadlines(f.c, f.c, lease.DeadlinesConfig{HeartbeatTimeout: timeout, HeartbeatInterval: timeout / 4, TakeoverGrace: timeout}, zaptest.NewLogger(t))
	t.Cleanup(m2.Revoke)
	m2.Establish(context.Background(), epoch2)
	if m2.Armed() != 2 {
		t.Fatalf("armed after establish = %d; want both running attempts", m2.Armed())
	}

	// The kept attempt's Worker reattaches at once and heartbeats on; the
	// other one never comes back.
	heartbeat := func() bool {
		if cancelled, reason := m2.Heartbeat(workerRef(kept)); cancelled {
			t.Fatalf("heartbeat of the kept attempt cancelled: %s", reason)
		}
		time.Sleep(timeout / 8)
		return true
	}
	leasetest.Eventually(t, "the silent attempt expires", func() bool { return heartbeat() && f.expired(lost) })
	for end := time.Now().Add(2 * timeout); time.Now().Before(end); {
		heartbeat()
	}
	if f.expired(kept) {
		t.Fatal("an attempt heartbeated within the grace period expired")
	}
	// The Worker completes with the token it got from the old leader.
	f.c.Complete(kept, "answer")
	for _, cmd := range f.c.Proposals("ExpireAttempt") {
		if e := cmd.GetExpireAttempt(); e.Epoch != epoch2 || e.StepId != lost.StepId {
			t.Fatalf("unexpected ExpireAttempt %v", e)
		}
	}
}

func TestExpiryRetriesTransientFailures(t *testing.T) {
	f := newFixture(t)
	f.c.FailNext("ExpireAttempt", 2)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startModel("s1")
	f.m.Arm(ref.StepId, ref.Attempt)
	leasetest.Eventually(t, "the attempt expires", func() bool { return f.expired(ref) })
	if n := f.c.Count("ExpireAttempt"); n != 3 {
		t.Fatalf("%d ExpireAttempt proposals; want 2 failures and 1 commit", n)
	}
}

func TestExpiryOfEndedAttemptProposesNothing(t *testing.T) {
	f := newFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startModel("s1")
	f.m.Arm(ref.StepId, ref.Attempt)
	f.c.Complete(ref, "done") // committed, but Release is never called
	leasetest.Eventually(t, "the lease is dropped", func() bool { return f.m.Armed() == 0 })
	if n := f.c.Count("ExpireAttempt"); n != 0 {
		t.Fatalf("%d ExpireAttempt proposals for an ended attempt; want 0", n)
	}
}

func TestRevokeStopsEveryDeadline(t *testing.T) {
	f := newFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	a := f.startModel("a")
	b := f.startModel("b")
	f.m.Arm(a.StepId, a.Attempt)
	f.m.Arm(b.StepId, b.Attempt)
	f.m.Revoke()
	if f.m.Armed() != 0 || f.m.Epoch() != 0 {
		t.Fatalf("after revoke: armed %d, epoch %d; want 0, 0", f.m.Armed(), f.m.Epoch())
	}
	f.c.Close() // any proposal from now on fails the test
	f.m.Arm(a.StepId, a.Attempt)
	if cancelled, _ := f.m.Heartbeat(workerRef(a)); cancelled {
		t.Fatal("heartbeat of a running attempt cancelled")
	}
	if f.m.Armed() != 0 {
		t.Fatal("revoked deadlines armed one")
	}
	time.Sleep(3 * timeout) // the deadlines pass
	if f.expired(a) || f.expired(b) {
		t.Fatal("an attempt expired after revoke")
	}
}

// An attempt whose StartAttempt committed but was never armed (its poller
// went away while the proposal was in flight) still gets a deadline and expires.
func TestUnarmedRunningAttemptIsSweptAndExpires(t *testing.T) {
	f := newFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startModel("s1") // committed, never armed
	leasetest.Eventually(t, "the sweep arms it and it expires", func() bool { return f.expired(ref) })
}

// workerRef is ref as a Worker's heartbeat names it (nil: none).
func workerRef(ref *fsmpb.AttemptRef) *dexv1.AttemptRef {
	if ref == nil {
		return nil
	}
	return &dexv1.AttemptRef{StepId: ref.StepId, Attempt: ref.Attempt, Token: ref.Token, Seq: ref.Seq}
}
