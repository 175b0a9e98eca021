package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/dispatch"
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

// recorder is the dispatcher as the leader's pipeline sees it, noting every
// StartAttempt it asked to propose behind a command.
type recorder struct {
	*dispatch.Dispatcher
	mu       sync.Mutex
	followed []*fsmpb.Command
}

func (r *recorder) PairReady(ready []*fsmpb.Step) ([]*fsmpb.Command, func([]*fsm.Result, []error)) {
	next, done := r.Dispatcher.PairReady(ready)
	r.mu.Lock()
	r.followed = append(r.followed, next...)
	r.mu.Unlock()
	return next, done
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.followed)
}

// pipeline makes the test's proposals go through the leader's pipeline,
// paired with the dispatcher (recorded).
func (f *fixture) pipeline() (*recorder, *dispatch.Pipeline) {
	r := &recorder{Dispatcher: f.d}
	p := dispatch.NewPipeline(f.c, f.c, f.clock)
	p.Pair(r)
	f.c.ProposeThrough(p)
	return r, p
}

func (f *fixture) pair() *recorder {
	r, _ := f.pipeline()
	return r
}

// A Step queued while its Worker's poll waits is started by a StartAttempt
// proposed right behind the command that queued it: the poll gets the task
// without a StartAttempt of its own.
func TestPair_AWaitingPollGetsTheStepStartedBehindItsCommand(t *testing.T) {
	f := newFixture(t, options{})
	rec := f.pair()
	got := f.pollAsync("model", 5*time.Second)
	f.c.CreateSession("s1", "hello")

	tasks := <-got
	if len(tasks) != 1 || tasks[0].SessionId != "s1" || tasks[0].Kind != dexv1.StepKind_STEP_KIND_RUN_MODEL {
		t.Fatalf("the waiting poll got %v; want the RunModel of s1", tasks)
	}
	if rec.count() != 1 || rec.followed[0].GetStartAttempt().GetStepId() != tasks[0].Ref.StepId || rec.followed[0].GetStartAttempt().GetWorkerId() != "model" {
		t.Fatalf("proposed behind the command: %v; want the StartAttempt of %s on model", rec.followed, tasks[0].Ref.StepId)
	}
	// The log: the CreateSession, then at once its Step's StartAttempt, the
	// only one proposed.
	log := f.c.Proposals("")
	if n := len(log); n < 2 || log[n-2].GetCreateSession() == nil || log[n-1].GetStartAttempt().GetStepId() != tasks[0].Ref.StepId {
		t.Fatalf("the last proposals are not the CreateSession and the StartAttempt behind it: %v", log[max(0, len(log)-2):])
	}
	if n := f.c.Count("StartAttempt"); n != 1 {
		t.Fatalf("%d StartAttempt proposals; want the one behind the command", n)
	}
	s := f.step(tasks[0].Ref.StepId)
	if s.Status != running || len(s.Attempts) != 1 || s.Attempts[0].WorkerId != "model" || s.Attempts[0].Token != tasks[0].Ref.Token {
		t.Fatalf("step %s with attempts %v", s.Status, s.Attempts)
	}
	if f.deadlines.Armed() != 1 {
		t.Fatalf("armed deadlines %d; want 1", f.deadlines.Armed())
	}
	if f.d.Waiting() {
		t.Fatal("a poll still counts as waiting after it got its task")
	}
}

// Without a waiting poll nothing is predicted or proposed behind a command;
// a poll that timed out no longer counts as waiting.
func TestPair_NoWaitingPollNoFollowUp(t *testing.T) {
	f := newFixture(t, options{})
	rec := f.pair()
	<-f.pollAsync("w1", 50*time.Millisecond) // times out: nothing for w1
	if f.d.Waiting() {
		t.Fatal("a poll that timed out still counts as waiting")
	}
	f.c.CreateSession("s1", "hello")
	if rec.count() != 0 || f.c.Count("StartAttempt") != 0 {
		t.Fatalf("%d follow-ups and %d StartAttempts with no poll waiting", rec.count(), f.c.Count("StartAttempt"))
	}
	if task := f.pollOne("model"); task.SessionId != "s1" {
		t.Fatalf("task of %s", task.SessionId)
	}
}

// A follow-up that does not commit leaves the Step queued, and the poll it
// was offered to takes it with a StartAttempt of its own.
func TestPair_AFailedFollowUpFallsBackToThePoll(t *testing.T) {
	f := newFixture(t, options{})
	rec := f.pair()
	got := f.pollAsync("model", 5*time.Second)
	f.c.FailNext("StartAttempt", 1)
	f.c.CreateSession("s1", "hello")

	tasks := <-got
	if rec.count() != 1 {
		t.Fatalf("%d follow-ups; want the one that failed", rec.count())
	}
	if len(tasks) != 1 || tasks[0].Ref.StepId != rec.followed[0].GetStartAttempt().GetStepId() || tasks[0].Ref.Attempt != 1 {
		t.Fatalf("the poll got %v after the failed follow-up; want attempt 1 of the same Step", tasks)
	}
	if n := f.c.Count("StartAttempt"); n != 2 {
		t.Fatalf("%d StartAttempt proposals; want the failed follow-up and the poll's own", n)
	}
}

// A poll whose Worker should leave Steps to others is not offered one: an
// unhealthy Worker (its tasks expire unclaimed) gets no follow-up, a healthy
// one does.
func TestPair_AnUnhealthyWorkerIsNotOffered(t *testing.T) {
	f := newFixture(t, options{})
	rec := f.pair()
	f.c.RegisterWorker("model2", true)
	for i := range dispatch.UnhealthyAfter {
		id := fmt.Sprintf("s%d", i)
		f.c.CreateSession(id, "hi")
		task := f.pollOne("model")
		if task.SessionId != id {
			t.Fatalf("model took %s; want %s", task.SessionId, id)
		}
		f.c.Do(&fsmpb.Command{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_ExpireAttempt{ExpireAttempt: &fsmpb.ExpireAttempt{
			StepId: task.Ref.StepId, Attempt: task.Ref.Attempt, Epoch: f.epoch,
		}}})
	}

	onModel := f.pollAsync("model", 100*time.Millisecond)
	f.c.CreateSession("late", "hi")
	if rec.count() != 0 {
		t.Fatalf("an unhealthy Worker's poll was offered %v", rec.followed)
	}
	<-onModel

	f.pollOne("model2") // takes late's Step, which no one was offered
	onModel2 := f.pollAsync("model2", 5*time.Second)
	f.c.CreateSession("later", "hi")
	if rec.count() != 1 || rec.followed[0].GetStartAttempt().GetWorkerId() != "model2" {
		t.Fatalf("follow-ups %v; want one on model2", rec.followed)
	}
	if tasks := <-onModel2; len(tasks) != 1 || tasks[0].SessionId != "later" {
		t.Fatalf("model2's poll got %v; want later's Step", tasks)
	}
}

// Every proposal of the pipeline, the paired StartAttempt too, leaves its
// in-flight list once answered.
func TestPair_ThePipelineForgetsAnsweredProposals(t *testing.T) {
	f := newFixture(t, options{})
	rec, p := f.pipeline()
	got := f.pollAsync("model", 5*time.Second)
	f.c.CreateSession("s1", "hello")
	if tasks := <-got; len(tasks) != 1 || rec.count() != 1 {
		t.Fatalf("the waiting poll got %v with %d paired; want one task, paired", tasks, rec.count())
	}
	if n := p.InFlightCount(); n != 0 {
		t.Fatalf("%d proposals still in flight after every one was answered", n)
	}
}
