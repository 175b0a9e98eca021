package dispatch

import (
	"testing"

	"go.uber.org/zap/zaptest"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

// expireUnclaimed starts the next attempt of a session's queued Step on
// worker and expires it before any claim, then lets its retry backoff pass:
// the Step is ready again.
func (f *brokerFixture) expireUnclaimed(session, worker string) *fsmpb.Step {
	f.t.Helper()
	st := f.c.Queued(session)[0]
	at := f.c.Start(st.Id, worker)
	f.c.Do(&fsmpb.Command{NowMs: f.clock.Now().UnixMilli(), Body: &fsmpb.Command_ExpireAttempt{ExpireAttempt: &fsmpb.ExpireAttempt{
		StepId: st.Id, Attempt: at.N, Epoch: f.c.Epoch(),
	}}})
	f.clock.Advance(fsmRetryBackoff)
	f.promote()
	return f.c.State().Step(st.Id)
}

// fsmRetryBackoff covers the state machine's first retry backoff.
const fsmRetryBackoff = 2 * DefaultPreferOtherWait

// claim claims the running attempt of a Step, as its Worker does.
func (f *brokerFixture) claim(stepID string) {
	f.t.Helper()
	st := f.c.State().Step(stepID)
	at := st.Attempts[len(st.Attempts)-1]
	f.c.Do(&fsmpb.Command{NowMs: f.clock.Now().UnixMilli(), Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{
		Ref: &fsmpb.AttemptRef{StepId: st.Id, Attempt: at.N, Token: at.Token, Seq: 1},
	}}})
}

func (f *brokerFixture) takeFor(worker string, wait bool) ([]*fsmpb.Step, *waiter) {
	f.t.Helper()
	steps, w, err := f.b.takeFor(worker, []interest{{key: queueKey{model: true}}}, 5, nil, wait)
	if err != nil {
		f.t.Fatalf("take for %s: %v", worker, err)
	}
	for _, s := range steps {
		f.b.release(s.Id) // nothing is started: back in the queue
	}
	return steps, w
}

func (f *brokerFixture) health(worker string) *dexv1.WorkerHealth {
	for _, h := range f.b.WorkerHealth() {
		if h.WorkerId == worker {
			return h
		}
	}
	return &dexv1.WorkerHealth{WorkerId: worker}
}

// The retry of a Step whose attempt expired unclaimed on one Worker goes to
// another polling Worker.
func TestBrokerRetryOfAnUnclaimedExpiryGoesToAnotherWorker(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.RegisterWorker("model2", true)
	f.c.CreateSession("s1", "hi")
	st := f.expireUnclaimed("s1", "model")

	if got, w := f.takeFor("model", true); len(got) != 0 || w == nil || w.recheck <= 0 || w.recheck > DefaultPreferOtherWait {
		t.Fatalf("the Worker that never claimed attempt 1 took %v (waiter %+v); want nothing and a recheck within %s", got, w, DefaultPreferOtherWait)
	} else {
		f.b.drop(w)
	}
	if got, _ := f.takeFor("model2", false); len(got) != 1 || got[0].Id != st.Id {
		t.Fatalf("the other Worker took %v; want the retry of %s", got, st.Id)
	}
}

// A Worker waiting on the queue is woken for a Step another Worker leaves.
func TestBrokerLeavingAStepWakesAnotherWaitingWorker(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.RegisterWorker("model2", true)
	f.c.CreateSession("s1", "hi")
	f.expireUnclaimed("s1", "model")

	other := &waiter{ch: make(chan struct{}), keys: []interest{{key: queueKey{model: true}}}, worker: "model2"}
	f.b.mu.Lock()
	f.b.queue(queueKey{model: true}).waiters[other] = struct{}{}
	f.b.mu.Unlock()
	if got, _ := f.takeFor("model", false); len(got) != 0 {
		t.Fatalf("took %v while another Worker waits", got)
	}
	if !closed(other.ch) {
		t.Fatal("the waiting Worker was not woken")
	}
}

// With a single Worker the retry still runs on it, once no other Worker took
// it within the short wait.
func TestBrokerSingleWorkerStillGetsTheRetry(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.CreateSession("s1", "hi")
	st := f.expireUnclaimed("s1", "model")
	if got, w := f.takeFor("model", true); len(got) != 0 {
		t.Fatalf("took %v at once", got)
	} else {
		f.b.drop(w)
	}
	f.clock.Advance(DefaultPreferOtherWait)
	if got, _ := f.takeFor("model", false); len(got) != 1 || got[0].Id != st.Id {
		t.Fatalf("the only Worker took %v after the wait; want the retry of %s", got, st.Id)
	}
}

// Two unclaimed expiries in a row make a Worker unhealthy: it gets fresh
// Steps only when no healthy Worker takes them, until it claims again.
func TestBrokerWorkerUnhealthyUntilItClaims(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.RegisterWorker("model2", true)
	f.c.CreateSession("s1", "hi")
	f.c.CreateSession("s2", "hi")
	f.expireUnclaimed("s1", "model")
	if h := f.health("model"); h.Unhealthy || h.UnclaimedInARow != 1 {
		t.Fatalf("after one unclaimed expiry: %v; want healthy, 1 in a row", h)
	}
	f.expireUnclaimed("s2", "model")
	if h := f.health("model"); !h.Unhealthy || h.UnclaimedInARow != 2 || h.UnclaimedExpiries != 2 {
		t.Fatalf("after two unclaimed expiries: %v; want unhealthy, 2 in a row", h)
	}

	f.c.CreateSession("s3", "hi") // a fresh Step, never tried
	// s1's retry has been ready longer than the short wait with no other
	// Worker taking it; s2's and the fresh s3's are left to the others.
	if got, w := f.takeFor("model", true); len(got) != 1 || got[0].SessionId != "s1" {
		t.Fatalf("the unhealthy Worker took %v; want only s1, ready the longest", sessionsOf(got))
	} else if w != nil {
		f.b.drop(w)
	}
	if got, _ := f.takeFor("model2", false); len(got) != 3 {
		t.Fatalf("the healthy Worker took %v; want s1, s2 and s3", sessionsOf(got))
	}
	f.clock.Advance(DefaultPreferOtherWait)
	if got, _ := f.takeFor("model", false); len(got) != 3 {
		t.Fatalf("with no healthy Worker polling, the unhealthy one took %v; want all 3", sessionsOf(got))
	}

	s3 := f.c.Queued("s3")[0]
	f.c.Start(s3.Id, "model")
	f.claim(s3.Id)
	if h := f.health("model"); h.Unhealthy || h.UnclaimedInARow != 0 || h.UnclaimedExpiries != 2 {
		t.Fatalf("after a claim: %v; want healthy, 0 in a row, 2 in all", h)
	}
}

// An attempt that was claimed and then expired says nothing about its
// Worker's claiming.
func TestBrokerAClaimedExpiryDoesNotCount(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.RegisterWorker("model2", true)
	f.c.CreateSession("s1", "hi")
	st := f.c.Queued("s1")[0]
	at := f.c.Start(st.Id, "model")
	f.claim(st.Id)
	f.c.Do(&fsmpb.Command{NowMs: f.clock.Now().UnixMilli(), Body: &fsmpb.Command_ExpireAttempt{ExpireAttempt: &fsmpb.ExpireAttempt{
		StepId: st.Id, Attempt: at.N, Epoch: f.c.Epoch(),
	}}})
	f.clock.Advance(fsmRetryBackoff)
	f.promote()
	if h := f.health("model"); h.Unhealthy || h.UnclaimedExpiries != 0 {
		t.Fatalf("health %v; want no unclaimed expiry", h)
	}
	if got, _ := f.takeFor("model", false); len(got) != 1 {
		t.Fatalf("the Worker took %v; want the retry at once", got)
	}
}

// A new leader's broker rebuilds the preference and the count from the
// Steps' attempts.
func TestBrokerANewLeaderRebuildsThePreference(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.RegisterWorker("model2", true)
	f.c.CreateSession("s1", "hi")
	f.expireUnclaimed("s1", "model")
	f.b.Stop()

	f.b = newBroker(f.c, f.c.Epoch(), f.clock.Now, zaptest.NewLogger(t), nil)
	f.c.OnApplied(f.b.Applied)
	f.b.start()
	t.Cleanup(f.b.Stop)
	if h := f.health("model"); h.UnclaimedExpiries != 1 {
		t.Fatalf("rebuilt health %v; want 1 unclaimed expiry", h)
	}
	if got, _ := f.takeFor("model", false); len(got) != 0 {
		t.Fatalf("on the new leader the Worker that never claimed took %v", got)
	}
	if got, _ := f.takeFor("model2", false); len(got) != 1 {
		t.Fatalf("the other Worker took %v; want the retry", got)
	}
}

// The report drops Workers that are no longer registered.
func TestBrokerHealthForgetsDeregisteredWorkers(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.RegisterWorker("gone", true)
	f.c.CreateSession("s1", "hi")
	f.expireUnclaimed("s1", "gone")
	if h := f.health("gone"); h.UnclaimedExpiries != 1 {
		t.Fatalf("health %v; want 1 unclaimed expiry", h)
	}
	f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_DeregisterWorker{DeregisterWorker: &fsmpb.DeregisterWorker{WorkerId: "gone", Epoch: f.c.Epoch()}}})
	if hs := f.b.WorkerHealth(); len(hs) != 0 {
		t.Fatalf("health %v after the Worker was deregistered; want none", hs)
	}
}

// nextStepAfterRetryElsewhere lets s1's first RunModel attempt expire
// unclaimed on "model", runs the retry on "model2", whose output calls
// lookup, and returns the command that completes that lookup: it leaves the
// session's next RunModel ready.
func (f *brokerFixture) nextStepAfterRetryElsewhere() *fsmpb.Command {
	f.t.Helper()
	f.c.RegisterWorker("model2", true)
	f.c.CreateSession("s1", "hi")
	st := f.expireUnclaimed("s1", "model")
	at := f.c.Start(st.Id, "model2")
	f.claim(st.Id)
	f.c.Complete(leasetest.Ref(st.Id, at), "calling", leasetest.Call("c1", "lookup", "{}"))
	lk := f.c.Queued("s1")[0]
	lat := f.c.Start(lk.Id, "w1")
	return &fsmpb.Command{NowMs: f.clock.Now().UnixMilli(), Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{
		Ref:    &fsmpb.AttemptRef{StepId: lk.Id, Attempt: lat.N, Token: lat.Token, Seq: 1},
		Result: &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ToolResult{ToolResult: &fsmpb.ToolResult{Content: "found"}}},
	}}}
}

// A Worker whose attempt expired unclaimed leaves the session's next Step,
// not only the retry, to another polling Worker: its open poll may be all
// that is left of a stopped process.
func TestBrokerTheSessionsNextStepGoesToAnotherWorker(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.Do(f.nextStepAfterRetryElsewhere())
	next := f.c.Queued("s1")
	if len(next) != 1 || next[0].Kind != fsmpb.StepKind_STEP_KIND_RUN_MODEL || len(next[0].Attempts) != 0 {
		t.Fatalf("queued %v; want the turn's next RunModel", next)
	}

	if got, w := f.takeFor("model", true); len(got) != 0 || w == nil || w.recheck <= 0 {
		t.Fatalf("the Worker that let the session's attempt expire took %v (waiter %+v); want nothing and a recheck", got, w)
	} else {
		f.b.drop(w)
	}
	if got, _ := f.takeFor("model2", false); len(got) != 1 || got[0].Id != next[0].Id {
		t.Fatalf("the other Worker took %v; want %s", got, next[0].Id)
	}
	// Other sessions are not kept from it.
	f.c.CreateSession("s2", "hi")
	if got, _ := f.takeFor("model", false); len(got) != 1 || got[0].SessionId != "s2" {
		t.Fatalf("the Worker took %v; want s2's Step at once", sessionsOf(got))
	}
}

// A Step predicted ready is not offered to the open poll of a Worker that let
// an attempt of the session expire unclaimed; another waiting poll gets it.
func TestBrokerNoOfferOfTheSessionsNextStepToTheStuckWorker(t *testing.T) {
	f := newBrokerFixture(t, nil)
	cmd := f.nextStepAfterRetryElsewhere()
	pred := f.c.Predict(cmd)
	if len(pred) != 1 || pred[0].Kind != fsmpb.StepKind_STEP_KIND_RUN_MODEL {
		t.Fatalf("predicted %v; want the turn's next RunModel", pred)
	}
	wait := func(worker string) *waiter {
		w := &waiter{ch: make(chan struct{}), keys: []interest{{key: queueKey{model: true}}}, worker: worker}
		f.b.mu.Lock()
		f.b.nwaiting++
		f.b.queue(queueKey{model: true}).waiters[w] = struct{}{}
		f.b.mu.Unlock()
		return w
	}
	stuck := wait("model")
	if worker, off := f.b.offer(pred[0], f.clock.Now().UnixMilli()); off != nil {
		t.Fatalf("offered %s to %s; want no offer while only the stuck Worker waits", pred[0].Id, worker)
	}
	wait("model2")
	if worker, off := f.b.offer(pred[0], f.clock.Now().UnixMilli()); off == nil || worker != "model2" {
		t.Fatalf("offered to %q; want model2", worker)
	}
	if closed(stuck.ch) {
		t.Fatal("the stuck Worker's poll was woken")
	}
}

// With no other Worker polling, the session's next Step still goes to the
// Worker that let its attempt expire, after the short wait.
func TestBrokerTheSessionsNextStepStillRunsOnALoneWorker(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.Do(f.nextStepAfterRetryElsewhere())
	next := f.c.Queued("s1")[0]
	if got, w := f.takeFor("model", true); len(got) != 0 {
		t.Fatalf("took %v at once", got)
	} else {
		f.b.drop(w)
	}
	f.clock.Advance(DefaultPreferOtherWait)
	if got, _ := f.takeFor("model", false); len(got) != 1 || got[0].Id != next.Id {
		t.Fatalf("the lone Worker took %v after the wait; want %s", got, next.Id)
	}
}

// Once the Worker claims a task it is trusted with the session again.
func TestBrokerAClaimEndsTheSessionsPreference(t *testing.T) {
	f := newBrokerFixture(t, nil)
	f.c.Do(f.nextStepAfterRetryElsewhere())
	f.c.CreateSession("s2", "hi")
	s2 := f.c.Queued("s2")[0]
	f.c.Start(s2.Id, "model")
	f.claim(s2.Id)
	if got, _ := f.takeFor("model", false); len(got) != 1 || got[0].SessionId != "s1" {
		t.Fatalf("after a claim the Worker took %v; want s1's next Step at once", sessionsOf(got))
	}
}
