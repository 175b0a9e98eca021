package fsm

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

var testTrace = &fsmpb.TraceContext{
	TraceId: bytes.Repeat([]byte{0xab}, 16),
	SpanId:  bytes.Repeat([]byte{0xcd}, 8),
}

// spansOf collects the traced spans every applied entry reports.
func spansOf(d *driver) *[]TracedSpan {
	var got []TracedSpan
	d.f.opts.OnApplied = func(a *Applied) { got = append(got, a.Spans...) }
	return &got
}

func (d *driver) createTraced(id, msg string, trace *fsmpb.TraceContext) {
	d.t.Helper()
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: id, MessageId: id + "-m0", Message: msg, Trace: trace,
	}}})
}

// A turn started by a traced call keeps the call's trace on the turn and
// each of its Steps, and the entries that end an attempt, a Step and the
// turn report their spans, with the times the commands carried.
func TestTracedTurn_ReportsItsAttemptStepAndTurnSpans(t *testing.T) {
	d := newDriver(t)
	got := spansOf(d)
	d.createTraced("s1", "hello", testTrace)
	startedAt := d.now
	if tr := d.session("s1").Turn.GetTrace(); !bytes.Equal(tr.GetTraceId(), testTrace.TraceId) || !bytes.Equal(tr.GetSpanId(), testTrace.SpanId) {
		t.Fatalf("the turn's trace is %v; want the call's %v", tr, testTrace)
	}
	st := d.queued("s1", fsmpb.StepKind_STEP_KIND_RUN_MODEL)
	if !bytes.Equal(st.GetTrace().GetTraceId(), testTrace.TraceId) {
		t.Fatalf("the RunModel Step's trace is %v; want the turn's", st.GetTrace())
	}
	d.advance(time.Second)
	h := d.start(st)
	d.advance(2 * time.Second)
	h.fail(fsmpb.ErrorType_ERROR_TYPE_OVERLOADED, "overloaded")
	if len(*got) != 1 || (*got)[0].Kind != SpanAttempt || (*got)[0].Status != "failed" || (*got)[0].Error != "overloaded" || !(*got)[0].Failed {
		t.Fatalf("a failed attempt reported %+v; want one failed attempt span", *got)
	}
	h2 := d.start(d.step(st.Id))
	d.advance(time.Second)
	endedAt := d.now
	h2.answer("done")

	var attempts, steps, turns []TracedSpan
	for _, s := range *got {
		switch s.Kind {
		case SpanAttempt:
			attempts = append(attempts, s)
		case SpanStep:
			steps = append(steps, s)
		case SpanTurn:
			turns = append(turns, s)
		}
	}
	if len(attempts) != 2 || attempts[1].Attempt != 2 || attempts[1].Failed || attempts[1].Worker == "" {
		t.Fatalf("attempt spans %+v; want attempt 1 failed and attempt 2 succeeded", attempts)
	}
	if len(steps) != 1 || steps[0].StepID != st.Id || steps[0].StartMs != st.CreatedAtMs || steps[0].EndMs != endedAt || steps[0].Failed {
		t.Fatalf("step spans %+v; want the RunModel Step from %d to %d", steps, st.CreatedAtMs, endedAt)
	}
	if len(turns) != 1 || turns[0].Turn != 1 || turns[0].StartMs != startedAt || turns[0].EndMs != endedAt || turns[0].Status != "completed" || turns[0].Failed {
		t.Fatalf("turn spans %+v; want turn 1 completed, from %d to %d", turns, startedAt, endedAt)
	}
	if d.session("s1").Turn != nil {
		t.Fatal("the turn did not end")
	}
}

// The ids are a function of the trace and the record alone, so a new
// leader derives the ids the old one handed out; each record has its own.
func TestSpanIDs_AreDerivedAndDistinct(t *testing.T) {
	ids := map[[8]byte]string{
		TurnSpanID(testTrace, "s1", 1):       "turn 1",
		TurnSpanID(testTrace, "s1", 2):       "turn 2",
		StepSpanID(testTrace, "s1/1"):        "step 1",
		AttemptSpanID(testTrace, "s1/1", 1):  "attempt 1",
		AttemptSpanID(testTrace, "s1/1", 2):  "attempt 2",
		AttemptSpanID(testTrace, "s1/10", 1): "step 10 attempt 1",
	}
	if len(ids) != 6 {
		t.Fatalf("two records share a span id: %v", ids)
	}
	if AttemptSpanID(testTrace, "s1/1", 1) != AttemptSpanID(testTrace.CloneVT(), "s1/1", 1) {
		t.Fatal("the same attempt got two ids")
	}
	other := &fsmpb.TraceContext{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: testTrace.SpanId}
	if StepSpanID(other, "s1/1") == StepSpanID(testTrace, "s1/1") {
		t.Fatal("one Step in two traces got one id")
	}
}

// An untraced turn, or one whose trace context is malformed, is not
// traced: nothing is stored and no span reported. A cancelled traced turn
// reports the cancelled attempt, Step and turn.
func TestTrace_UntracedMalformedAndCancelled(t *testing.T) {
	d := newDriver(t)
	got := spansOf(d)
	d.createSession("plain", "", "hello")
	d.startNext("plain", fsmpb.StepKind_STEP_KIND_RUN_MODEL).answer("hi")
	for i, bad := range []*fsmpb.TraceContext{
		{TraceId: []byte{1, 2, 3}, SpanId: testTrace.SpanId},
		{TraceId: make([]byte, 16), SpanId: testTrace.SpanId},
		{TraceId: testTrace.TraceId, SpanId: make([]byte, 8)},
	} {
		d.createTraced(fmt.Sprint("bad", i), "hello", bad)
	}
	if len(*got) != 0 {
		t.Fatalf("untraced turns reported spans: %+v", *got)
	}
	for _, s := range d.f.State().Sessions() {
		if s.Turn.GetTrace() != nil {
			t.Fatalf("session %s keeps a malformed trace %v", s.Id, s.Turn.Trace)
		}
	}

	d.createTraced("c1", "hello", testTrace)
	d.startNext("c1", fsmpb.StepKind_STEP_KIND_RUN_MODEL)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{SessionId: "c1", Reason: "enough"}}})
	kinds := map[SpanKind]string{}
	for _, s := range *got {
		kinds[s.Kind] = s.Status
	}
	if kinds[SpanAttempt] != "cancelled" || kinds[SpanStep] != "failed" || kinds[SpanTurn] != "cancelled" {
		t.Fatalf("a cancelled traced turn reported %v; want the attempt cancelled, the Step failed and the turn cancelled", kinds)
	}
}
