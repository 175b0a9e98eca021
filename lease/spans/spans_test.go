package spans

import (
	"bytes"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dexhq/dex/api/tracing"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

var tc = &fsmpb.TraceContext{TraceId: bytes.Repeat([]byte{0x11}, 16), SpanId: bytes.Repeat([]byte{0x22}, 8)}

func newExporter(t *testing.T) (*Exporter, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(tracing.IDs{}))
	return New(tp.Tracer("dexd"), nil), rec
}

// The leader exports a traced turn's attempt, Step and turn under their
// derived ids, each the child of the next, the turn the child of the call
// that started it, with the times the state recorded.
func TestExporter_ExportsTheTreeOfATurn(t *testing.T) {
	e, rec := newExporter(t)
	if err := e.EstablishLeadership(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC).UnixMilli()
	e.Applied(&fsm.Applied{Spans: []fsm.TracedSpan{
		{Kind: fsm.SpanAttempt, Trace: tc, SessionID: "s1", Turn: 1, StepID: "s1/1", StepKind: fsmpb.StepKind_STEP_KIND_RUN_MODEL, Attempt: 1, Worker: "w1", StartMs: base + 10, ClaimedMs: base + 20, EndMs: base + 900, Status: "succeeded"},
		{Kind: fsm.SpanStep, Trace: tc, SessionID: "s1", Turn: 1, StepID: "s1/1", StepKind: fsmpb.StepKind_STEP_KIND_RUN_MODEL, StartMs: base + 5, EndMs: base + 900, Status: "succeeded"},
		{Kind: fsm.SpanTurn, Trace: tc, SessionID: "s1", Turn: 1, StartMs: base, EndMs: base + 900, Status: "completed"},
	}})
	e.Close()

	got := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		got[s.Name()] = s
	}
	turn, step, attempt := got["dex.turn"], got["dex.step RunModel"], got["dex.attempt"]
	if turn == nil || step == nil || attempt == nil {
		t.Fatalf("exported %v; want dex.turn, dex.step RunModel and dex.attempt", got)
	}
	want := trace.TraceID(tc.TraceId)
	for _, s := range []sdktrace.ReadOnlySpan{turn, step, attempt} {
		if s.SpanContext().TraceID() != want {
			t.Fatalf("%s is in trace %s; want %s", s.Name(), s.SpanContext().TraceID(), want)
		}
	}
	checks := []struct {
		span         sdktrace.ReadOnlySpan
		id, parent   trace.SpanID
		start, endMs int64
	}{
		{turn, fsm.TurnSpanID(tc, "s1", 1), trace.SpanID(tc.SpanId), base, base + 900},
		{step, fsm.StepSpanID(tc, "s1/1"), fsm.TurnSpanID(tc, "s1", 1), base + 5, base + 900},
		{attempt, fsm.AttemptSpanID(tc, "s1/1", 1), fsm.StepSpanID(tc, "s1/1"), base + 10, base + 900},
	}
	for _, c := range checks {
		if c.span.SpanContext().SpanID() != c.id || c.span.Parent().SpanID() != c.parent {
			t.Errorf("%s: id %s parent %s; want id %s parent %s", c.span.Name(), c.span.SpanContext().SpanID(), c.span.Parent().SpanID(), trace.SpanID(c.id), c.parent)
		}
		if c.span.StartTime().UnixMilli() != c.start || c.span.EndTime().UnixMilli() != c.endMs {
			t.Errorf("%s: %v to %v; want the recorded times", c.span.Name(), c.span.StartTime(), c.span.EndTime())
		}
	}
	if ev := attempt.Events(); len(ev) != 1 || ev[0].Name != "claimed" || ev[0].Time.UnixMilli() != base+20 {
		t.Errorf("the attempt's events are %v; want claimed at +20 ms", ev)
	}
}

// A node that does not lead exports nothing (the leader does); a failed
// attempt's span carries the error.
func TestExporter_OnlyTheLeaderExports(t *testing.T) {
	e, rec := newExporter(t)
	failed := fsm.TracedSpan{Kind: fsm.SpanAttempt, Trace: tc, SessionID: "s1", StepID: "s1/1", Attempt: 1, StartMs: 1, EndMs: 2, Status: "failed", Error: "overloaded", Failed: true}
	e.Applied(&fsm.Applied{Spans: []fsm.TracedSpan{failed}})
	_ = e.EstablishLeadership(t.Context(), 1)
	e.RevokeLeadership()
	e.Applied(&fsm.Applied{Spans: []fsm.TracedSpan{failed}})
	_ = e.EstablishLeadership(t.Context(), 2)
	e.Applied(&fsm.Applied{Spans: []fsm.TracedSpan{failed}})
	e.Close()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans exported; want only the one applied while leading", len(ended))
	}
	if st := ended[0].Status(); st.Description != "overloaded" {
		t.Fatalf("the failed attempt's status is %+v; want the error", st)
	}
}
