package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

func TestAppliedCountsAttemptsAndSteps(t *testing.T) {
	c := leasetest.New(t)
	m := New(c.State)
	c.OnApplied(m.Applied)
	c.RegisterWorker("model", true)
	c.BumpEpoch()
	c.CreateSession("s1", "go")

	st := c.Queued("s1")[0]
	at := c.Start(st.Id, "model")
	c.Fail(leasetest.Ref(st.Id, at), fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down")
	at = c.Start(st.Id, "model")
	c.Complete(leasetest.Ref(st.Id, at), "done")

	if got := testutil.ToFloat64(m.attempts.WithLabelValues("RunModel", "failed", "rate_limit")); got != 1 {
		t.Fatalf("failed RunModel attempts %v; want 1", got)
	}
	if got := testutil.ToFloat64(m.attempts.WithLabelValues("RunModel", "succeeded", "none")); got != 1 {
		t.Fatalf("succeeded RunModel attempts %v; want 1", got)
	}
	if n := testutil.CollectAndCount(m.stepDuration); n != 1 {
		t.Fatalf("%d Step duration series; want 1 (RunModel succeeded)", n)
	}
	// A model may name any tool: an unknown one gets no series of its own.
	if got := m.tools.label(c.State(), "made-up"); got != "_unknown" {
		t.Fatalf("an unknown tool is labelled %q; want _unknown", got)
	}
}

func TestObserveApplyByCommandAndRejection(t *testing.T) {
	m := New(nil)
	start, _ := fsm.Encode(&fsmpb.Command{NowMs: 5, Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: "x"}}})
	bump, _ := fsm.Encode(&fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{}}})
	if commandNames[commandOf(start)] != "start_attempt" || commandNames[commandOf(bump)] != "bump_epoch" {
		t.Fatalf("command types %q, %q", commandNames[commandOf(start)], commandNames[commandOf(bump)])
	}
	if commandOf([]byte{0xff}) != 0 {
		t.Fatal("garbage names a command type")
	}
	m.ObserveApply([]fsm.Entry{{Index: 1, Data: start}, {Index: 2, Data: bump}},
		[]*fsm.Result{{Err: &fsm.Rejection{Code: fsm.CodeNotFound}}, {}}, 2*time.Millisecond)
	if got := testutil.ToFloat64(m.rejected.WithLabelValues("start_attempt", "not_found")); got != 1 {
		t.Fatalf("rejected start_attempt %v; want 1", got)
	}
	if n := testutil.CollectAndCount(m.rejected); n != 1 {
		t.Fatalf("%d rejection series; want 1", n)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collectors()...)
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}

// Usage is counted by agent and model, and by the session's fairness key,
// whose label values are bounded.
func TestAppliedCountsUsageByFairnessKey(t *testing.T) {
	c := leasetest.New(t)
	m := New(c.State)
	c.OnApplied(m.Applied)
	c.RegisterWorker("model", true)
	c.BumpEpoch()
	m.fairnessKeys.max = 2
	for _, s := range []struct{ id, key string }{{"a", "tenant-a"}, {"b", "tenant-b"}, {"c", "tenant-c"}, {"n", ""}} {
		c.Do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: s.id, FairnessKey: s.key, MessageId: "m", Message: "go"}}})
		st := c.Queued(s.id)[0]
		at := c.Start(st.Id, "model")
		c.Report(leasetest.Ref(st.Id, at), &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{
			Text: "done", Usage: &fsmpb.Usage{InputTokens: 100, OutputTokens: 20, CostMicros: 7, Model: "m1"},
		}}})
	}
	for key, want := range map[string]float64{"tenant-a": 120, "tenant-b": 120, "_other": 120, "none": 120} {
		if got := testutil.ToFloat64(m.keyTokens.WithLabelValues(key)); got != want {
			t.Errorf("tokens of key %s: %v; want %v", key, got, want)
		}
	}
	if got := testutil.ToFloat64(m.keyCost.WithLabelValues("tenant-a")); got != 7 {
		t.Errorf("cost of tenant-a: %v; want 7", got)
	}
	if got := testutil.ToFloat64(m.modelTokens.WithLabelValues("default", "m1", "input")); got != 400 {
		t.Errorf("input tokens of the default agent: %v; want 400", got)
	}
}
