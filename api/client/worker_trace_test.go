package client

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

const (
	attemptTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	attemptSpan  = "00f067aa0ba902b7"
)

// recordSpans registers a tracer provider that records every span, for
// the test's length.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec
}

// A task of a traced turn runs its handler under a Worker span that is the
// child of the attempt's span named by the task's traceparent; the
// handler's own spans nest under it, and a failure is recorded on it. A
// task without a traceparent, or with a malformed one, runs in a root span.
func TestWorkerSpanIsTheChildOfTheAttempt(t *testing.T) {
	rec := recordSpans(t)
	traced := toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
	traced.Traceparent = "00-" + attemptTrace + "-" + attemptSpan + "-01"
	failing := toolTask("st2", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
	failing.Traceparent = traced.Traceparent
	plain := toolTask("st3", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
	malformed := toolTask("st4", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
	malformed.Traceparent = "00-not-a-trace-01"
	f := newFakeWorkers(traced, failing, plain, malformed)
	nodes := startWorkerNodes(t, f, 1)
	seen := make(chan ToolCall, 4)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		seen <- c
		_, own := otel.Tracer("handler").Start(ctx, "the handler's call")
		own.End()
		if c.StepID == "st2" {
			return ToolResult{}, errors.New("disk full")
		}
		return ToolResult{Content: "saved"}, nil
	})}})
	f.waitFor(t, "four results", func() bool { return len(f.completes)+len(f.fails) == 4 })

	for range 4 {
		if c := <-seen; (c.StepID == "st1" || c.StepID == "st2") && c.Traceparent != traced.Traceparent {
			t.Fatalf("the handler of %s got traceparent %q; want the task's", c.StepID, c.Traceparent)
		}
	}
	workerSpans := map[string]trace.SpanContext{}
	roots := map[string]bool{}
	var handlerSpans []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "dex.tool save_note":
			step := ""
			for _, a := range s.Attributes() {
				if a.Key == "dex.step" {
					step = a.Value.AsString()
				}
			}
			if step == "st3" || step == "st4" {
				roots[step] = !s.Parent().IsValid()
				continue
			}
			workerSpans[step] = s.SpanContext()
			if s.Parent().TraceID().String() != attemptTrace || s.Parent().SpanID().String() != attemptSpan {
				t.Errorf("the Worker span of %s has parent %s/%s; want the attempt's %s/%s", step, s.Parent().TraceID(), s.Parent().SpanID(), attemptTrace, attemptSpan)
			}
			if step == "st2" && (s.Status().Description != "disk full" || len(s.Events()) == 0) {
				t.Errorf("the failed handler's span has status %+v and events %v; want the error recorded", s.Status(), s.Events())
			}
		case "the handler's call":
			handlerSpans = append(handlerSpans, s)
		}
	}
	if len(workerSpans) != 2 || !workerSpans["st1"].IsValid() || !workerSpans["st2"].IsValid() {
		t.Fatalf("Worker spans under the attempt for %v; want st1 and st2", workerSpans)
	}
	if !roots["st3"] || !roots["st4"] {
		t.Fatalf("root spans %v; want st3 (no traceparent) and st4 (a malformed one) each in a root span", roots)
	}
	nested := 0
	for _, h := range handlerSpans {
		if h.Parent().SpanID() == workerSpans["st1"].SpanID() || h.Parent().SpanID() == workerSpans["st2"].SpanID() {
			nested++
		}
	}
	if nested != 2 {
		t.Fatalf("%d of the traced handlers' own spans nest under the Worker span; want 2", nested)
	}
}
