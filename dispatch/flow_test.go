package dispatch

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

// createOrdered creates a session with a first message (its RunModel
// queued) and the given dispatch order.
func createOrdered(t *testing.T, c *leasetest.Cluster, id string, cs *fsmpb.CreateSession) {
	t.Helper()
	cs.SessionId, cs.MessageId, cs.Message = id, id+"-m0", "go"
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: cs}})
}

// started takes a Step the broker handed out through its StartAttempt, as a
// poll does, and returns the attempt.
func (f *brokerFixture) started(st *fsmpb.Step) *fsmpb.Attempt {
	f.t.Helper()
	at := f.c.Start(st.Id, "model")
	f.b.release(st.Id)
	return at
}

func countBy(steps []*fsmpb.Step, of func(*fsmpb.Step) string) map[string]int {
	n := map[string]int{}
	for _, s := range steps {
		n[of(s)]++
	}
	return n
}

func TestFlow_HigherPriorityGoesFirst(t *testing.T) {
	f := newBrokerFixture(t, nil)
	for i := range 3 {
		createOrdered(t, f.c, fmt.Sprintf("low%d", i), &fsmpb.CreateSession{Priority: 1})
	}
	createOrdered(t, f.c, "plain", &fsmpb.CreateSession{})
	createOrdered(t, f.c, "urgent", &fsmpb.CreateSession{Priority: 5})
	got := sessionsOf(f.take(modelKeys, 5))
	if want := "[urgent plain low0 low1 low2]"; fmt.Sprint(got) != want {
		t.Fatalf("took %v; want %s", got, want)
	}
}

func TestFlow_KeysShareDispatchByWeight(t *testing.T) {
	f := newBrokerFixture(t, nil)
	for i := range 20 {
		createOrdered(t, f.c, fmt.Sprintf("big%02d", i), &fsmpb.CreateSession{FairnessKey: "big"})
	}
	createOrdered(t, f.c, "small0", &fsmpb.CreateSession{FairnessKey: "small"})
	createOrdered(t, f.c, "small1", &fsmpb.CreateSession{FairnessKey: "small"})
	got := f.take(modelKeys, 4)
	if n := countBy(got, func(s *fsmpb.Step) string { return f.c.State().Session(s.SessionId).FairnessKey }); n["small"] != 2 {
		t.Fatalf("the first 4 Steps went %v; want both of the small key's among them", n)
	}

	g := newBrokerFixture(t, nil)
	for i := range 12 {
		createOrdered(t, g.c, fmt.Sprintf("a%02d", i), &fsmpb.CreateSession{FairnessKey: "a", FairnessWeight: 3})
		createOrdered(t, g.c, fmt.Sprintf("b%02d", i), &fsmpb.CreateSession{FairnessKey: "b", FairnessWeight: 1})
	}
	n := countBy(g.take(modelKeys, 8), func(s *fsmpb.Step) string { return g.c.State().Session(s.SessionId).FairnessKey })
	if n["a"] != 6 || n["b"] != 2 {
		t.Fatalf("weights 3:1 took %v of 8; want a 6, b 2", n)
	}
}

// A key that was idle gets no credit for it: it joins at the others' pass.
func TestFlow_AnIdleKeyDoesNotCatchUp(t *testing.T) {
	f := newBrokerFixture(t, nil)
	createOrdered(t, f.c, "c-first", &fsmpb.CreateSession{FairnessKey: "c"})
	for i := range 30 {
		createOrdered(t, f.c, fmt.Sprintf("a%02d", i), &fsmpb.CreateSession{FairnessKey: "a"})
	}
	f.take(modelKeys, 12) // c's one Step, then a's: c is idle while a is served
	for i := range 10 {
		createOrdered(t, f.c, fmt.Sprintf("c%02d", i), &fsmpb.CreateSession{FairnessKey: "c"})
	}
	n := countBy(f.take(modelKeys, 6), func(s *fsmpb.Step) string { return f.c.State().Session(s.SessionId).FairnessKey })
	if n["c"] > 4 || n["a"] < 2 {
		t.Fatalf("after a's 10, six Steps went %v; want them shared, not c's alone", n)
	}
}

func TestFlow_MaxConcurrentCallsOfAProvider(t *testing.T) {
	f := newLimitedFixture(t, nil, map[string]ProviderLimit{"openai": {MaxConcurrent: 2}})
	for i := range 4 {
		createOrdered(t, f.c, fmt.Sprintf("o%d", i), &fsmpb.CreateSession{Provider: "openai"})
	}
	createOrdered(t, f.c, "other", &fsmpb.CreateSession{Provider: "anthropic"})
	got := f.take(modelKeys, 5)
	if n := countBy(got, func(s *fsmpb.Step) string { return f.c.State().Session(s.SessionId).Provider }); n["openai"] != 2 || n["anthropic"] != 1 {
		t.Fatalf("took %v; want 2 of openai (its limit) and anthropic's", n)
	}
	var first *fsmpb.Attempt
	var firstStep *fsmpb.Step
	for _, st := range got {
		at := f.started(st)
		if firstStep == nil && f.c.State().Session(st.SessionId).Provider == "openai" {
			first, firstStep = at, st
		}
	}
	_, w, err := f.b.take(modelKeys, 1, nil, true)
	if err != nil || w == nil {
		t.Fatalf("take at the limit: waiter %v, err %v; want a waiter", w, err)
	}
	f.c.Complete(leasetest.Ref(firstStep.Id, first), "done")
	if !closed(w.ch) {
		t.Fatal("a call of the provider ended and its waiting poll was not woken")
	}
	if got := f.take(modelKeys, 5); len(got) != 1 {
		t.Fatalf("took %d after one call ended; want 1", len(got))
	}
}

func TestFlow_CallsPerMinuteOfAProvider(t *testing.T) {
	f := newLimitedFixture(t, nil, map[string]ProviderLimit{"openai": {CallsPerMinute: 2}})
	for i := range 4 {
		createOrdered(t, f.c, fmt.Sprintf("o%d", i), &fsmpb.CreateSession{Provider: "openai"})
	}
	if got := f.take(modelKeys, 4); len(got) != 2 {
		t.Fatalf("took %d; want 2 (calls per minute)", len(got))
	}
	_, w, _ := f.b.take(modelKeys, 1, nil, true)
	if w == nil || w.recheck <= 0 || w.recheck > 30*time.Second {
		t.Fatalf("waiter %+v; want one that looks again within 30 s, when a call is allowed", w)
	}
	f.b.drop(w)
	f.clock.Advance(30 * time.Second)
	if got := f.take(modelKeys, 4); len(got) != 1 {
		t.Fatalf("took %d after 30 s; want 1", len(got))
	}
}

func TestFlow_TokensPerMinuteOfAProvider(t *testing.T) {
	f := newLimitedFixture(t, nil, map[string]ProviderLimit{"openai": {TokensPerMinute: 1000}})
	for i := range 3 {
		createOrdered(t, f.c, fmt.Sprintf("o%d", i), &fsmpb.CreateSession{Provider: "openai"})
	}
	st := f.take(modelKeys, 1)[0]
	at := f.started(st)
	f.c.Report(leasetest.Ref(st.Id, at), &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{
		Text: "long", Usage: &fsmpb.Usage{InputTokens: 1400, OutputTokens: 100},
	}}})
	if got := f.take(modelKeys, 2); len(got) != 0 {
		t.Fatalf("took %d with the minute's tokens spent; want 0", len(got))
	}
	f.clock.Advance(31 * time.Second) // 1000/min refills 516 of the 500 owed
	if got := f.take(modelKeys, 2); len(got) == 0 {
		t.Fatal("took nothing once the tokens refilled")
	}
}

func TestFlow_AHeldProviderWaitsForItsHoldAcrossLeaders(t *testing.T) {
	f := newBrokerFixture(t, nil)
	createOrdered(t, f.c, "o1", &fsmpb.CreateSession{Provider: "openai"})
	createOrdered(t, f.c, "o2", &fsmpb.CreateSession{Provider: "openai"})
	createOrdered(t, f.c, "plain", &fsmpb.CreateSession{})
	st := f.c.Queued("o1")[0]
	at := f.c.Start(st.Id, "model")
	f.c.Report(leasetest.Ref(st.Id, at), &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{
		ErrorType: fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "429", RetryAfterMs: 20_000,
	}}})
	if got := sessionsOf(f.take(modelKeys, 3)); fmt.Sprint(got) != "[plain]" {
		t.Fatalf("took %v while openai is held; want plain only", got)
	}
	// A new leader's broker, built from the state, keeps the hold.
	next := newBroker(f.c, f.c.Epoch(), f.clock.Now, zaptest.NewLogger(t), nil)
	next.start()
	t.Cleanup(next.Stop)
	f.c.OnApplied(next.Applied)
	if got, _, _ := next.take(modelKeys, 3, nil, false); fmt.Sprint(sessionsOf(got)) != "[plain]" {
		t.Fatalf("the next leader took %v during the hold; want plain only", sessionsOf(got))
	}
	_, w, _ := next.take(modelKeys, 1, nil, true)
	if w == nil || w.recheck != 20*time.Second {
		t.Fatalf("waiter %+v; want one that looks again when the hold ends, in 20 s", w)
	}
	next.drop(w)
	f.clock.Advance(20 * time.Second)
	next.mu.Lock()
	next.promoteDue(f.clock.Now().UnixMilli())
	next.mu.Unlock()
	if got, _, _ := next.take(modelKeys, 3, nil, false); len(got) != 2 {
		t.Fatalf("took %v once the hold passed; want o1's retry and o2", sessionsOf(got))
	}
}

// A Step handed straight to a waiting poll (pair.go) obeys its provider's
// hold too.
func TestFlow_AHeldProviderGetsNoPairedStep(t *testing.T) {
	f := newBrokerFixture(t, nil)
	createOrdered(t, f.c, "o1", &fsmpb.CreateSession{Provider: "openai"})
	f.c.CreateSession("plain", "")
	st := f.c.Queued("o1")[0]
	at := f.c.Start(st.Id, "model")
	f.c.Report(leasetest.Ref(st.Id, at), &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{
		ErrorType: fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "429", RetryAfterMs: 20_000,
	}}})
	f.b.mu.Lock()
	f.b.agentProviders = map[string]string{"": "openai"} // the default agent's sessions are created with openai
	f.b.mu.Unlock()
	_, w, err := f.b.takeFor("model", []interest{{key: queueKey{model: true}}}, 1, nil, true)
	if err != nil || w == nil {
		t.Fatalf("poll: waiter %v err %v", w, err)
	}
	now := f.clock.Now().UnixMilli()
	model := func(session string) *fsmpb.Step {
		return &fsmpb.Step{Id: session + "-s9", SessionId: session, Kind: fsmpb.StepKind_STEP_KIND_RUN_MODEL}
	}
	for _, session := range []string{"o1", "not-created-yet"} {
		if worker, off := f.b.offer(model(session), now); off != nil {
			t.Fatalf("a Step of %s was offered to %s during openai's hold", session, worker)
		}
	}
	if worker, off := f.b.offer(model("plain"), now); off == nil || worker != "model" {
		t.Fatalf("a Step of a session without a provider was not offered: %q %v", worker, off)
	}
}

func TestFlow_GaugesAndStatusShowEachProvider(t *testing.T) {
	f := newLimitedFixture(t, nil, map[string]ProviderLimit{"openai": {MaxConcurrent: 1}})
	for i := range 3 {
		createOrdered(t, f.c, fmt.Sprintf("o%d", i), &fsmpb.CreateSession{Provider: "openai"})
	}
	createOrdered(t, f.c, "a", &fsmpb.CreateSession{Provider: "anthropic"})
	f.started(f.take(modelKeys, 1)[0]) // openai's one call, o0's
	st := f.c.Queued("a")[0]
	at := f.c.Start(st.Id, "model")
	f.c.Report(leasetest.Ref(st.Id, at), &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{
		ErrorType: fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "429", RetryAfterMs: 5_000,
	}}})
	f.promote()
	g := f.gauges()
	want := "[{anthropic 0 0 5s} {openai 1 2 0s}]"
	if got := fmt.Sprint(g.Providers); got != want {
		t.Fatalf("provider gauges %s; want %s", got, want)
	}
	ps := f.b.Providers()
	if len(ps) != 2 || ps[0].Hold.GetUntilMs() != f.clock.Now().UnixMilli()+5000 || ps[1].Running != 1 || ps[1].Throttled != 2 || ps[1].MaxConcurrent != 1 {
		t.Fatalf("providers %v", ps)
	}
}

// The heaps keep the dispatch order: with sessions of random priorities,
// keys and weights arriving between takes, each take hands out the lane a
// scan of every ready lane finds first (lanesLess).
func TestFlow_HeapsKeepTheOrderAScanFinds(t *testing.T) {
	f := newBrokerFixture(t, nil)
	rng := rand.New(rand.NewPCG(7, 11))
	n := 0
	add := func(k int) {
		for range k {
			n++
			createOrdered(t, f.c, fmt.Sprintf("s%03d", n), &fsmpb.CreateSession{
				Priority: uint32(1 + rng.IntN(3)), FairnessKey: []string{"", "a", "b", "c"}[rng.IntN(4)], FairnessWeight: uint32(1 + rng.IntN(3)),
			})
		}
	}
	add(40)
	for i := 0; i < 200; i++ {
		if rng.IntN(3) == 0 {
			add(1 + rng.IntN(4))
		}
		f.b.mu.Lock()
		var want *lane
		for _, ls := range f.b.lanesOf {
			for _, l := range ls {
				if want == nil || f.b.order.lanesLess(l, want) {
					want = l
				}
			}
		}
		f.b.mu.Unlock()
		got := f.take(modelKeys, 1)
		if want == nil {
			if len(got) != 0 {
				t.Fatalf("take %d: took %v from empty queues", i, sessionsOf(got))
			}
			continue
		}
		if len(got) != 1 || got[0].SessionId != want.session {
			t.Fatalf("take %d: took %v; a scan finds %s first", i, sessionsOf(got), want.session)
		}
	}
}
