package tracing

import (
	"context"
	crand "crypto/rand"

	"go.opentelemetry.io/otel/trace"
)

// idKey carries a span id chosen by the caller (WithSpanID).
type idKey struct{}

// WithSpanID makes the span started with ctx take id instead of a random
// one. The leader exports the spans of a traced turn under ids derived from
// the turn, its Steps and their attempts, which it handed to Workers before
// the spans end (fsm.AttemptSpanID).
func WithSpanID(ctx context.Context, id trace.SpanID) context.Context {
	return context.WithValue(ctx, idKey{}, id)
}

// IDs is the tracer provider's id generator (sdktrace.WithIDGenerator):
// random ids, or the span id WithSpanID put in the context.
type IDs struct{}

func (IDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	for !t.IsValid() {
		_, _ = crand.Read(t[:])
	}
	return t, IDs{}.NewSpanID(ctx, t)
}

func (IDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := ctx.Value(idKey{}).(trace.SpanID); ok && id.IsValid() {
		return id
	}
	var s trace.SpanID
	for !s.IsValid() {
		_, _ = crand.Read(s[:])
	}
	return s
}

// Traceparent is the W3C traceparent header of a sampled span context
// ("00-TRACE-SPAN-01").
func Traceparent(traceID trace.TraceID, spanID trace.SpanID) string {
	return "00-" + traceID.String() + "-" + spanID.String() + "-01"
}
