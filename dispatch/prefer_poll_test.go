package dispatch_test

import (
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// A lone Worker whose attempt expired unclaimed still gets the retry: its
// open poll looks again once no other Worker took the Step.
func TestPollALoneWorkerGetsTheRetryOfItsUnclaimedExpiry(t *testing.T) {
	f := newFixture(t, options{})
	f.c.CreateSession("s1", "hi")
	first := f.poll("model", 1, 0)
	if len(first) != 1 {
		t.Fatalf("first poll got %d tasks; want 1", len(first))
	}
	ref := first[0].Ref
	f.c.Do(&fsmpb.Command{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_ExpireAttempt{ExpireAttempt: &fsmpb.ExpireAttempt{
		StepId: ref.StepId, Attempt: ref.Attempt, Epoch: f.epoch,
	}}})
	retry := f.poll("model", 1, 5*time.Second)
	if len(retry) != 1 || retry[0].Ref.StepId != ref.StepId || retry[0].Ref.Attempt != 2 {
		t.Fatalf("the lone Worker's poll got %v; want attempt 2 of %s", retry, ref.StepId)
	}
}
