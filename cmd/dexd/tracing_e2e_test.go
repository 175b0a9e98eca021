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
