package fsm

import (
	"bytes"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// createOrdered creates session id (child of parent when given) with a
// first message and the given dispatch order.
func (d *driver) createOrdered(id, parent string, c *fsmpb.CreateSession) *Result {
	d.t.Helper()
	c.SessionId, c.ParentId, c.MessageId, c.Message = id, parent, id+"-m0", "go"
	return d.try(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: c}})
}

// rateLimited fails the attempt with rate_limit and a Retry-After.
func (h *handle) rateLimited(retryAfter time.Duration) {
	h.d.t.Helper()
	h.d.do(h.report(&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{
		ErrorType: fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "429", RetryAfterMs: retryAfter.Milliseconds(),
	}}}))
}

func TestDispatchOrder_ChildInheritsWhatItIsNotGiven(t *testing.T) {
	d := newDriver(t)
	if r := d.createOrdered("p", "", &fsmpb.CreateSession{Priority: 5, FairnessKey: "tenant-a", FairnessWeight: 4, Provider: "openai"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := d.createOrdered("c", "p", &fsmpb.CreateSession{Provider: "anthropic"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := d.createOrdered("c2", "p", &fsmpb.CreateSession{Priority: 1, FairnessKey: "tenant-b", FairnessWeight: 2}); r.Err != nil {
		t.Fatal(r.Err)
	}
	c, c2 := d.session("c"), d.session("c2")
	if Priority(c) != 5 || c.FairnessKey != "tenant-a" || FairnessWeight(c) != 4 || c.Provider != "anthropic" {
		t.Errorf("child: priority %d key %q weight %d provider %q; want the parent's 5, tenant-a, 4 and its own anthropic",
			Priority(c), c.FairnessKey, FairnessWeight(c), c.Provider)
	}
	if Priority(c2) != 1 || c2.FairnessKey != "tenant-b" || FairnessWeight(c2) != 2 || c2.Provider != "" {
		t.Errorf("child with its own order: priority %d key %q weight %d provider %q", Priority(c2), c2.FairnessKey, FairnessWeight(c2), c2.Provider)
	}
	d.createSession("plain", "", "hi")
	if s := d.session("plain"); Priority(s) != DefaultPriority || FairnessWeight(s) != 1 {
		t.Errorf("a session created with none has priority %d weight %d; want %d and 1", Priority(s), FairnessWeight(s), DefaultPriority)
	}
}

func TestDispatchOrder_OutOfRangeIsRefusedAndChangesNothing(t *testing.T) {
	for name, c := range map[string]*fsmpb.CreateSession{
		"priority 6": {Priority: 6},
		"weight":     {FairnessWeight: MaxFairnessWeight + 1},
		"key":        {FairnessKey: string(bytes.Repeat([]byte("k"), MaxFairnessKey+1))},
		"provider":   {Provider: string(bytes.Repeat([]byte("p"), MaxFairnessKey+1))},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDriver(t)
			before := d.stateBytes()
			if r := d.createOrdered("s", "", c); r.Err == nil || r.Err.Code != CodeInvalid {
				t.Fatalf("created: %+v; want invalid", r.Err)
			}
			if !bytes.Equal(before, d.stateBytes()) {
				t.Fatal("a refused create changed the state")
			}
		})
	}
}

func TestProviderHold_RateLimitWithRetryAfterHoldsTheProvider(t *testing.T) {
	d := newDriver(t)
	d.createOrdered("s", "", &fsmpb.CreateSession{Provider: "openai"})
	h := d.startNext("s", kRunModel)
	h.rateLimited(90 * time.Second)
	hold := d.f.State().ProviderHold("openai")
	if hold == nil || hold.UntilMs != d.now+90_000 || hold.StepId != h.st {
		t.Fatalf("hold %+v; want openai held until now+90 s by %s", hold, h.st)
	}
	if st := d.step(h.st); st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED || st.ReadyAtMs != hold.UntilMs {
		t.Fatalf("the Step's retry is %v ready at %d; want queued at the hold's end %d", st.Status, st.ReadyAtMs, hold.UntilMs)
	}
	// A shorter Retry-After does not shorten the hold; a longer one extends it.
	d.createOrdered("t", "", &fsmpb.CreateSession{Provider: "openai"})
	d.startNext("t", kRunModel).rateLimited(10 * time.Second)
	if got := d.f.State().ProviderHold("openai").UntilMs; got != hold.UntilMs {
		t.Fatalf("a shorter Retry-After moved the hold to %d; want %d", got, hold.UntilMs)
	}
	d.advance(2 * time.Hour)
	d.createOrdered("u", "", &fsmpb.CreateSession{Provider: "anthropic"})
	d.startNext("u", kRunModel).rateLimited(3 * time.Hour)
	if h := d.f.State().ProviderHold("openai"); h != nil {
		t.Errorf("openai's passed hold is still kept: %+v", h)
	}
	if h := d.f.State().ProviderHold("anthropic"); h == nil || h.UntilMs != d.now+MaxRetryAfter.Milliseconds() {
		t.Errorf("anthropic's hold %+v; want it capped at %v", h, MaxRetryAfter)
	}
}

func TestProviderHold_OnlyARateLimitWithRetryAfterOfAProviderHolds(t *testing.T) {
	d := newDriver(t)
	d.createOrdered("s", "", &fsmpb.CreateSession{Provider: "openai"})
	d.startNext("s", kRunModel).rateLimited(0)
	d.startNext("s", kRunModel).fail(fsmpb.ErrorType_ERROR_TYPE_OVERLOADED, "busy")
	if hs := d.f.State().ProviderHolds(); len(hs) != 0 {
		t.Fatalf("holds %v; want none without a Retry-After", hs)
	}
	d.createSession("none", "", "hi")
	h := d.startNext("none", kRunModel)
	h.rateLimited(time.Minute)
	if hs := d.f.State().ProviderHolds(); len(hs) != 0 {
		t.Fatalf("holds %v; want none for a session without a provider", hs)
	}
	if st := d.step(h.st); st.ReadyAtMs != d.now+time.Minute.Milliseconds() {
		t.Fatalf("its retry is ready at %d; want after the Retry-After", st.ReadyAtMs-d.now)
	}
}

func TestProviderHold_SurvivesASnapshot(t *testing.T) {
	d := newDriver(t)
	d.createOrdered("s", "", &fsmpb.CreateSession{Provider: "openai"})
	d.startNext("s", kRunModel).rateLimited(time.Minute)
	g := New(Options{})
	if err := g.Restore(bytes.NewReader(persist(t, d.f))); err != nil {
		t.Fatal(err)
	}
	if h := g.State().ProviderHold("openai"); h == nil || h.UntilMs != d.now+60_000 {
		t.Fatalf("restored hold %+v", h)
	}
}
