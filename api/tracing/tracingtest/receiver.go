// Package tracingtest is an OTLP/gRPC trace receiver for tests: it listens
// on 127.0.0.1, takes what exporters send, and answers questions about the
// spans it holds.
package tracingtest

import (
	"context"
	"encoding/hex"
	"net"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one received span, with the service that sent it.
type Span struct {
	Service         string
	Name            string
	TraceID, SpanID string // hex
	ParentSpanID    string // hex; "" for a root
	Attributes      map[string]string
	StartNs, EndNs  uint64
}

// Receiver collects spans.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	// Addr is where it listens (HOST:PORT); the endpoint to give is
	// "grpc://" + Addr.
	Addr string

	mu    sync.Mutex
	spans []Span
}

// Start listens on a free port of 127.0.0.1 until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Addr: lis.Addr().String()}
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r
}

// Endpoint is the --otlp-endpoint that sends here.
func (r *Receiver) Endpoint() string { return "grpc://" + r.Addr }

// Export takes an exporter's batch.
func (r *Receiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, spanOf(service, s))
			}
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func spanOf(service string, s *tracepb.Span) Span {
	out := Span{
		Service: service, Name: s.Name,
		TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
		Attributes: map[string]string{}, StartNs: s.StartTimeUnixNano, EndNs: s.EndTimeUnixNano,
	}
	if len(s.ParentSpanId) > 0 {
		out.ParentSpanID = hex.EncodeToString(s.ParentSpanId)
	}
	for _, a := range s.Attributes {
		v := a.GetValue()
		switch {
		case v.GetStringValue() != "":
			out.Attributes[a.Key] = v.GetStringValue()
		default:
			out.Attributes[a.Key] = v.String()
		}
	}
	return out
}

// Spans returns the spans received so far for which keep is true (all
// when keep is nil).
func (r *Receiver) Spans(keep func(Span) bool) []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, s := range r.spans {
		if keep == nil || keep(s) {
			out = append(out, s)
		}
	}
	return out
}
