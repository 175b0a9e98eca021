//go:build e2e

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/tracing/tracingtest"
)

// With --otlp-endpoint, dexd and dexworker export a span of every gRPC
// call to a real OTLP receiver, and the trace context crosses each call:
// a client's CreateSession span is the parent of the server's, and a
// Worker's PollTask span the parent of the leader's.
func TestTracesCrossEveryCall(t *testing.T) {
	receiver := tracingtest.Start(t)
	c := newTestCluster(t)
	c.extra = []string{"--otlp-endpoint", receiver.Endpoint()}
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	dir := t.TempDir()
	runDexworker(t, c, dir, "--ledger", filepath.Join(dir, "ledger.jsonl"), "--poll-wait", "2s", "--otlp-endpoint", receiver.Endpoint())

	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	conn, err := client.Dial("dex:///"+strings.Join(c.grpc, ","), grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx, request := tp.Tracer("test").Start(ctx, "a user's request")
	created, err := dexv1.NewSessionServiceClient(conn).CreateSession(ctx, &dexv1.CreateSessionRequest{Message: "hello"})
	request.End()
	if err != nil {
		t.Fatal(err)
	}
	waitTurnDone(t, c.grpc, created.Session.Id)

	var clientSpan sdktrace.ReadOnlySpan
	for _, s := range recorder.Ended() {
		if s.Name() == "dex.v1.SessionService/CreateSession" {
			clientSpan = s
		}
	}
	if clientSpan == nil || clientSpan.Parent().SpanID() != request.SpanContext().SpanID() {
		t.Fatalf("the client's CreateSession span is missing or not a child of the request: %v", clientSpan)
	}
	traceID := clientSpan.SpanContext().TraceID().String()
	waitUntil(t, 20*time.Second, "dexd's CreateSession span in the client's trace", func() (bool, string) {
		spans := receiver.Spans(func(s tracingtest.Span) bool {
			return s.Service == "dexd" && s.Name == "dex.v1.SessionService/CreateSession" && s.TraceID == traceID
		})
		for _, s := range spans {
			if s.ParentSpanID == clientSpan.SpanContext().SpanID().String() {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d spans of the trace from dexd, none a child of the client's", len(spans))
	})

	waitUntil(t, 20*time.Second, "a Worker's PollTask span and the leader's, its child", func() (bool, string) {
		worker := receiver.Spans(func(s tracingtest.Span) bool {
			return s.Service == "dexworker" && s.Name == "dex.v1.WorkerService/PollTask"
		})
		for _, w := range worker {
			served := receiver.Spans(func(s tracingtest.Span) bool {
				return s.Service == "dexd" && s.TraceID == w.TraceID && s.ParentSpanID == w.SpanID
			})
			if len(served) > 0 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d PollTask spans from the Worker, none served in its trace", len(worker))
	})
}

// With real processes: a turn is one trace from the call that started it
// through the leader to the Worker, across a SIGKILL of the leader in the
// middle of the turn. Every span of the turn's Steps and attempts is in the
// trace of the call, the turn under the call's span, each Step under the
// turn, each attempt under its Step and each Worker span under an attempt
// the leaders exported, the one that ran through the kill included.
func TestOneTracePerTurnAcrossALeaderKill(t *testing.T) {
	receiver := tracingtest.Start(t)
	c := newTestCluster(t)
	c.extra = []string{"--otlp-endpoint", receiver.Endpoint()}
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	dir := t.TempDir()
	long := numberedText(400) // 3 s of streaming: the leader dies in the middle
	script := map[string]any{"turns": []any{map[string]any{"match": "trace", "outputs": []any{
		map[string]any{"tool_calls": []any{map[string]any{"tool": "lookup", "arguments": map[string]any{"q": "dex"}}}},
		map[string]any{"text": long},
	}}}}
	runDexworker(t, c, dir, "--ledger", filepath.Join(dir, "ledger.jsonl"), "--script", writeScript(t, dir, script),
		"--stream", "--poll-wait", "2s", "--otlp-endpoint", receiver.Endpoint())

	conn, err := client.Dial("dex:///" + strings.Join(c.grpc, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	created, err := dexv1.NewSessionServiceClient(conn).CreateSession(ctx, &dexv1.CreateSessionRequest{Message: "trace"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Session.Id
	ofTurn := func(name string) func(tracingtest.Span) bool {
		return func(s tracingtest.Span) bool {
			return s.Service == "dexd" && s.Attributes["dex.session"] == id && strings.HasPrefix(s.Name, name)
		}
	}
	live, stopWatch := watchLive(ctx, client.New(conn), id)
	defer stopWatch()
	waitUntil(t, 20*time.Second, "the first model call and the lookup exported, the second model call streaming", func() (bool, string) {
		steps := receiver.Spans(ofTurn("dex.step"))
		got, _ := live.of(id + "-s3#1")
		return len(steps) >= 2 && len(got) >= len(long)/4, fmt.Sprintf("%d Step spans, %d bytes streamed", len(steps), len(got))
	})
	leader, _ := c.leaderIndex(t)
	c.procs[leader].kill()
	waitTurnDone(t, c.others(leader), id)

	var turn tracingtest.Span
	waitUntil(t, 20*time.Second, "the turn's span from the new leader", func() (bool, string) {
		turns := receiver.Spans(ofTurn("dex.turn"))
		if len(turns) == 1 {
			turn = turns[0]
		}
		return len(turns) == 1, fmt.Sprintf("%d turn spans", len(turns))
	})
	waitUntil(t, 20*time.Second, "the last model call's span from the Worker", func() (bool, string) {
		n := len(receiver.Spans(func(s tracingtest.Span) bool {
			return s.Service == "dexworker" && s.Name == "dex.model" && s.Attributes["dex.session"] == id
		}))
		return n == 2, fmt.Sprintf("%d Worker model spans", n)
	})

	inTrace := receiver.Spans(func(s tracingtest.Span) bool { return s.TraceID == turn.TraceID })
	byID := map[string]tracingtest.Span{}
	for _, s := range inTrace {
		if _, twice := byID[s.SpanID]; twice {
			t.Errorf("span %s (%s) exported twice", s.SpanID, s.Name)
		}
		byID[s.SpanID] = s
	}
	if call, ok := byID[turn.ParentSpanID]; !ok || call.Name != "dex.v1.SessionService/CreateSession" {
		t.Errorf("the turn's parent %s is %+v; want dexd's CreateSession span", turn.ParentSpanID, call)
	}
	steps, attempts := receiver.Spans(ofTurn("dex.step")), receiver.Spans(ofTurn("dex.attempt"))
	if len(steps) != 3 || len(attempts) < 3 {
		t.Fatalf("%d Step spans and %d attempt spans; want the 3 Steps (model, lookup, model) and an attempt each", len(steps), len(attempts))
	}
	for _, s := range append(steps, attempts...) {
		if s.TraceID != turn.TraceID {
			t.Errorf("%s of %s is in trace %s; want the turn's %s", s.Name, s.Attributes["dex.step"], s.TraceID, turn.TraceID)
		}
	}
	for _, s := range steps {
		if s.ParentSpanID != turn.SpanID {
			t.Errorf("%s has parent %s; want the turn %s", s.Name, s.ParentSpanID, turn.SpanID)
		}
	}
	for _, a := range attempts {
		if p, ok := byID[a.ParentSpanID]; !ok || !strings.HasPrefix(p.Name, "dex.step") || p.Attributes["dex.step"] != a.Attributes["dex.step"] {
			t.Errorf("attempt %s of %s has parent %s, not its Step's span", a.Attributes["dex.attempt"], a.Attributes["dex.step"], a.ParentSpanID)
		}
	}
	workers := receiver.Spans(func(s tracingtest.Span) bool { return s.Service == "dexworker" && s.Attributes["dex.session"] == id })
	if len(workers) != 3 {
		t.Errorf("%d Worker spans; want 3 (two model calls and the lookup)", len(workers))
	}
	for _, w := range workers {
		if p, ok := byID[w.ParentSpanID]; w.TraceID != turn.TraceID || !ok || p.Name != "dex.attempt" || p.Attributes["dex.step"] != w.Attributes["dex.step"] {
			t.Errorf("the Worker's %s of %s is in trace %s under %s; want the child of its attempt's span in the turn's trace", w.Name, w.Attributes["dex.step"], w.TraceID, w.ParentSpanID)
		}
	}
}
