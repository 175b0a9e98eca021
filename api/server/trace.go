package server

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// callTrace is the trace context a command that may start a turn carries:
// the call's own span when it is sampled (dexd traces its calls only with
// --otlp-endpoint), so the turn joins the caller's trace; nil otherwise.
func callTrace(ctx context.Context) *fsmpb.TraceContext {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return nil
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	return &fsmpb.TraceContext{TraceId: tid[:], SpanId: sid[:]}
}
