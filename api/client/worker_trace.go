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

// tracerName names the Worker library's spans in a tracing backend.
const tracerName = "github.com/dexhq/dex/api/client"

// taskSpan starts the Worker's span for a task of a traced turn, the child
// of the attempt's span, which the cluster's leader exports under the id
// the traceparent gives (docs/tracing.md). The handler runs with it in its
// context, so its own spans (an HTTP client's, a model SDK's) nest under
// it. A task with no traceparent, or a malformed one, gets no span; with
// no tracer provider registered the span is otel's no-op.
func taskSpan(ctx context.Context, t *dexv1.Task, attempt uint32) (context.Context, trace.Span) {
	if t.Traceparent == "" {
		return ctx, nil
	}
	parent := propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": t.Traceparent})
	if !trace.SpanContextFromContext(parent).IsValid() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("dex.session", t.SessionId),
		attribute.String("dex.step", t.Ref.GetStepId()),
		attribute.Int64("dex.attempt", int64(attempt)),
		attribute.String("dex.kind", t.Kind.String()),
	}
	name := "dex.model"
	switch t.Handler {
	case dexv1.TaskHandler_TASK_HANDLER_COMPACT:
		name = "dex.compact"
	case dexv1.TaskHandler_TASK_HANDLER_TOOL:
		name = "dex.tool " + t.Tool
	case dexv1.TaskHandler_TASK_HANDLER_POLL:
		name = "dex.poll " + t.Tool
	}
	if t.Tool != "" {
		attrs = append(attrs, attribute.String("dex.tool", t.Tool))
	}
	if t.Agent != "" {
		attrs = append(attrs, attribute.String("dex.agent", t.Agent))
	}
	return otel.Tracer(tracerName).Start(parent, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endTaskSpan ends a task's span, with the handler's error if it failed.
func endTaskSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
