package client

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// tracerName is the tracer of the Worker's spans, as in the Python and
// TypeScript libraries.
const tracerName = "dex.worker"

// taskSpan starts the Worker's span for a task: the child of the attempt's
// span, which the cluster's leader exports under the id the traceparent
// gives (docs/tracing.md), or a root span when the task has no traceparent
// (the turn is not traced) or a malformed one; never the child of a span
// active where the Worker was started. The handler runs with it in its
// context, so its own spans (an HTTP client's, a model SDK's) nest under
// it. With no tracer provider registered it is otel's no-op.
func taskSpan(ctx context.Context, t *dexv1.Task, attempt uint32) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	parent := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": t.Traceparent})
	if sc := trace.SpanContextFromContext(parent); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	attrs := []attribute.KeyValue{
		attribute.String("dex.session", t.SessionId),
		attribute.String("dex.step", t.Ref.GetStepId()),
		attribute.Int64("dex.attempt", int64(attempt)),
		attribute.String("dex.kind", t.Kind.String()),
	}
	name := "dex.model" // a model or compaction handler
	if t.Handler == dexv1.TaskHandler_TASK_HANDLER_TOOL || t.Handler == dexv1.TaskHandler_TASK_HANDLER_POLL {
		name = "dex.tool " + t.Tool
	}
	if t.Tool != "" {
		attrs = append(attrs, attribute.String("dex.tool", t.Tool))
	}
	if t.Agent != "" {
		attrs = append(attrs, attribute.String("dex.agent", t.Agent))
	}
	return otel.Tracer(tracerName).Start(ctx, name, append(opts, trace.WithAttributes(attrs...))...)
}

// endTaskSpan ends a task's span, with the handler's error if it failed.
func endTaskSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
