// Package spans is the leader service that exports the spans of traced
// turns (docs/tracing.md): each applied entry that ends a traced turn, Step
// or attempt reports it (fsm.TracedSpan), and the node that leads exports
// it, under the id derived from the record, as the child of its turn, Step
// or the call that started the turn. A new leader exports what it applies,
// so a turn's trace goes on across a takeover.
package spans

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/dexhq/dex/api/tracing"
	"github.com/dexhq/dex/fsm"
)

// queueLen bounds the applied entries whose spans wait for export; past it
// spans are dropped (and counted) rather than slowing the apply.
const queueLen = 4096

// Exporter is the leader service. Its Applied runs on the state machine's
// goroutine and only queues; one goroutine creates the spans.
type Exporter struct {
	tracer  trace.Tracer
	log     *zap.Logger
	leading atomic.Bool
	queue   chan []fsm.TracedSpan
	dropped atomic.Uint64
	stop    chan struct{}
	done    sync.WaitGroup
}

// New returns an exporter that creates its spans with tracer; Close stops it.
func New(tracer trace.Tracer, log *zap.Logger) *Exporter {
	if log == nil {
		log = zap.NewNop()
	}
	e := &Exporter{tracer: tracer, log: log.Named("spans"), queue: make(chan []fsm.TracedSpan, queueLen), stop: make(chan struct{})}
	e.done.Add(1)
	go e.run()
	return e
}

func (e *Exporter) EstablishLeadership(context.Context, uint64) error {
	e.leading.Store(true)
	return nil
}

func (e *Exporter) RevokeLeadership() { e.leading.Store(false) }

// Applied queues the spans an entry ended, when this node leads.
func (e *Exporter) Applied(a *fsm.Applied) {
	if len(a.Spans) == 0 || !e.leading.Load() {
		return
	}
	select {
	case e.queue <- a.Spans:
	default:
		if e.dropped.Add(uint64(len(a.Spans))) == uint64(len(a.Spans)) {
			e.log.Warn("spans dropped: the export queue is full")
		}
	}
}

// Dropped is how many spans were dropped because the queue was full.
func (e *Exporter) Dropped() uint64 { return e.dropped.Load() }

// Close stops the exporter after the queued spans are created.
func (e *Exporter) Close() {
	close(e.stop)
	e.done.Wait()
}

func (e *Exporter) run() {
	defer e.done.Done()
	for {
		select {
		case spans := <-e.queue:
			e.exportAll(spans)
		case <-e.stop:
			// Drain what is queued, then stop.
			for {
				select {
				case spans := <-e.queue:
					e.exportAll(spans)
				default:
					return
				}
			}
		}
	}
}

func (e *Exporter) exportAll(spans []fsm.TracedSpan) {
	for _, s := range spans {
		e.export(s)
	}
}

// export creates one span with its derived id, parent and the times the
// state recorded.
func (e *Exporter) export(s fsm.TracedSpan) {
	traceID := trace.TraceID(s.Trace.TraceId)
	var id, parent trace.SpanID
	var name string
	attrs := []attribute.KeyValue{attribute.String("dex.session", s.SessionID), attribute.Int64("dex.turn", int64(s.Turn))}
	switch s.Kind {
	case fsm.SpanTurn:
		name, id, parent = "dex.turn", fsm.TurnSpanID(s.Trace, s.SessionID, s.Turn), trace.SpanID(s.Trace.SpanId)
	case fsm.SpanStep:
		name, id, parent = "dex.step "+fsm.KindName(s.StepKind), fsm.StepSpanID(s.Trace, s.StepID), fsm.TurnSpanID(s.Trace, s.SessionID, s.Turn)
	case fsm.SpanAttempt:
		name, id, parent = "dex.attempt", fsm.AttemptSpanID(s.Trace, s.StepID, s.Attempt), fsm.StepSpanID(s.Trace, s.StepID)
		attrs = append(attrs, attribute.Int64("dex.attempt", int64(s.Attempt)), attribute.String("dex.worker", s.Worker))
	default:
		return
	}
	if s.StepID != "" {
		attrs = append(attrs, attribute.String("dex.step", s.StepID), attribute.String("dex.kind", fsm.KindName(s.StepKind)))
		if s.Tool != "" {
			attrs = append(attrs, attribute.String("dex.tool", s.Tool))
		}
	}
	attrs = append(attrs, attribute.String("dex.status", s.Status))
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: parent, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	_, span := e.tracer.Start(tracing.WithSpanID(ctx, id), name,
		trace.WithTimestamp(time.UnixMilli(s.StartMs)), trace.WithAttributes(attrs...))
	if s.ClaimedMs != 0 {
		span.AddEvent("claimed", trace.WithTimestamp(time.UnixMilli(s.ClaimedMs)))
	}
	if s.Failed {
		span.SetStatus(codes.Error, errorText(s))
	}
	span.End(trace.WithTimestamp(time.UnixMilli(s.EndMs)))
}

func errorText(s fsm.TracedSpan) string {
	if s.Error != "" {
		return s.Error
	}
	return s.Status
}
