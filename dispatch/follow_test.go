package dispatch_test

import (
	"context"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// pollAsync starts a poll of worker and returns its outcome's channel once
// the poll waits in the broker.
func (f *fixture) pollAsync(worker string, wait time.Duration) <-chan []*dexv1.Task {
	f.t.Helper()
	out := make(chan []*dexv1.Task, 1)
	go func() {
		tasks, err := f.d.Poll(context.Background(), worker, 1, wait)
		if err != nil {
			f.t.Errorf("poll %s: %v", worker, err)
		}
		out <- tasks
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !f.d.Waiting() {
		if time.Now().After(deadline) {
			f.t.Fatal("the poll never waited")
		}
		time.Sleep(time.Millisecond)
	}
	return out
}

// A Step queued while its Worker's poll waits is started by a StartAttempt
// proposed right behind the command that queued it: the poll gets the task
// without a StartAttempt of its own.
func TestFollow_AWaitingPollGetsTheStepStartedBehindItsCommand(t *testing.T) {
	f := newFixture(t, options{})
	f.c.SetFollower(f.d)
	got := f.pollAsync("model", 5*time.Second)
	f.c.CreateSession("s1", "hello")

	tasks := <-got
	if len(tasks) != 1 || tasks[0].SessionId != "s1" || tasks[0].Kind != dexv1.StepKind_STEP_KIND_RUN_MODEL {
		t.Fatalf("the waiting poll got %v; want the RunModel of s1", tasks)
	}
	// The log: the CreateSession, then at once its Step's StartAttempt.
	log := f.c.Proposals("")
	if n := len(log); n < 2 || log[n-2].GetCreateSession() == nil || log[n-1].GetStartAttempt().GetStepId() != tasks[0].Ref.StepId {
		t.Fatalf("the last proposals are not the CreateSession and the StartAttempt behind it: %v", log[max(0, len(log)-2):])
	}
	s := f.step(tasks[0].Ref.StepId)
	if s.Status != running || len(s.Attempts) != 1 || s.Attempts[0].WorkerId != "model" || s.Attempts[0].Token != tasks[0].Ref.Token {
		t.Fatalf("step %s with attempts %v", s.Status, s.Attempts)
	}
	if f.leases.Armed() != 1 {
		t.Fatalf("armed leases %d; want 1", f.leases.Armed())
	}
	if n := f.c.Count("StartAttempt"); n != 1 {
		t.Fatalf("%d StartAttempt proposals; want the one behind the command", n)
	}
}

// Without a waiting poll nothing is predicted or proposed behind a command.
func TestFollow_NoWaitingPollNoFollowUp(t *testing.T) {
	f := newFixture(t, options{})
	f.c.SetFollower(f.d)
	f.c.CreateSession("s1", "hello")
	if n := f.c.Count("StartAttempt"); n != 0 {
		t.Fatalf("%d StartAttempts proposed with no poll waiting", n)
	}
	if task := f.pollOne("model"); task.SessionId != "s1" {
		t.Fatalf("task of %s", task.SessionId)
	}
}

// A refused follow-up (its guess was wrong, or it did not commit) leaves the
// Step queued, and the poll it was offered to takes it as usual.
func TestFollow_ARefusedFollowUpFallsBackToThePoll(t *testing.T) {
	f := newFixture(t, options{})
	got := f.pollAsync("model", 5*time.Second)
	cmd := &fsmpb.Command{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: "s1", MessageId: "m1", Message: "hello",
	}}}
	ready := f.c.Predict(cmd)
	if len(ready) != 1 {
		t.Fatalf("predicted %d ready Steps; want the RunModel", len(ready))
	}
	next, done := f.d.Follow(ready)
	if len(next) != 1 || next[0].GetStartAttempt().GetWorkerId() != "model" {
		t.Fatalf("follow-ups %v; want a StartAttempt on model", next)
	}
	f.c.Do(cmd)
	done([]*fsm.Result{nil}, []error{context.DeadlineExceeded}) // it never committed

	tasks := <-got
	if len(tasks) != 1 || tasks[0].Ref.StepId != ready[0].Id || tasks[0].Ref.Attempt != 1 {
		t.Fatalf("the poll got %v after the refused follow-up; want attempt 1 of %s", tasks, ready[0].Id)
	}
	if n := f.c.Count("StartAttempt"); n != 1 {
		t.Fatalf("%d StartAttempt proposals; want the poll's own", n)
	}
}

// A poll whose Worker should leave the Step to another one is not offered
// it: the retry of an attempt that expired unclaimed on a Worker goes to
// another Worker's poll, or to none.
func TestFollow_AWorkerThatShouldAvoidTheStepIsNotOffered(t *testing.T) {
	f := newFixture(t, options{})
	f.c.RegisterWorker("model2", true)
	f.c.CreateSession("s0", "first")
	first := f.pollOne("model")
	f.c.Do(&fsmpb.Command{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_ExpireAttempt{ExpireAttempt: &fsmpb.ExpireAttempt{
		StepId: first.Ref.StepId, Attempt: first.Ref.Attempt, Epoch: f.epoch,
	}}})
	retry := f.step(first.Ref.StepId) // queued for attempt 2 after a backoff

	onModel := f.pollAsync("model", 100*time.Millisecond)
	if next, _ := f.d.Follow([]*dexv1.Step{retry}); len(next) != 0 {
		t.Fatalf("the retry was offered to the Worker it expired on: %v", next)
	}
	<-onModel

	onModel2 := f.pollAsync("model2", 5*time.Second)
	next, done := f.d.Follow([]*dexv1.Step{retry})
	if len(next) != 1 || next[0].GetStartAttempt().GetWorkerId() != "model2" || next[0].GetStartAttempt().GetAttempt() != 2 {
		t.Fatalf("follow-ups %v; want attempt 2 on model2", next)
	}
	// Proposed before its backoff ends, it is refused; the poll then takes
	// the retry when it is ready.
	res, err := f.c.Propose(context.Background(), next[0])
	if err != nil || res.Err == nil {
		t.Fatalf("a StartAttempt before the backoff ended: %v, %v; want refused", res, err)
	}
	done([]*fsm.Result{res}, []error{nil})
	if tasks := <-onModel2; len(tasks) != 1 || tasks[0].Ref.Attempt != 2 {
		t.Fatalf("model2's poll got %v; want attempt 2", tasks)
	}
}
