// Package tracing gives Dex's processes OpenTelemetry traces: spans
// exported over OTLP (gRPC or HTTP) to the collector --otlp-endpoint
// names, the W3C trace context carried on every gRPC call, and a sampler
// that follows the caller's decision. Off (no endpoint), nothing is set
// up and the gRPC servers and clients get no tracing handler at all.
package tracing

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"google.golang.org/grpc"
)

// Options say where spans go and how many new traces are kept.
type Options struct {
	// Endpoint is the OTLP collector: grpc://HOST:PORT (plaintext),
	// grpcs://HOST:PORT (TLS), http://HOST:PORT or https://HOST:PORT (OTLP
	// over HTTP, to /v1/traces unless a path is given). Empty: off.
	Endpoint string
	// Sample is the share of new traces kept, 0 to 1; a call that comes
	// with a trace keeps its caller's decision.
	Sample float64
}

// Register adds --otlp-endpoint and --trace-sample to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Endpoint, "otlp-endpoint", "", "export OpenTelemetry traces to this OTLP collector: grpc://HOST:PORT or grpcs://HOST:PORT (OTLP/gRPC), http://HOST:PORT or https://HOST:PORT (OTLP/HTTP) (default: no tracing)")
	fs.Float64Var(&o.Sample, "trace-sample", 1, "with --otlp-endpoint: the share of new traces kept, 0 to 1 (a call that comes with a trace follows its caller's decision)")
}

// On reports whether tracing is set up.
func (o Options) On() bool { return o.Endpoint != "" }

// endpoint is a parsed Options.Endpoint.
type endpoint struct {
	grpc, tls bool
	host      string // HOST:PORT
	path      string // OTLP/HTTP only; "" for the default
}

func parseEndpoint(s string) (endpoint, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return endpoint{}, fmt.Errorf("--otlp-endpoint %q: want grpc://HOST:PORT, grpcs://HOST:PORT, http://HOST:PORT or https://HOST:PORT", s)
	}
	e := endpoint{host: u.Host, path: u.Path}
	switch u.Scheme {
	case "grpc":
		e.grpc = true
	case "grpcs":
		e.grpc, e.tls = true, true
	case "http":
	case "https":
		e.tls = true
	default:
		return endpoint{}, fmt.Errorf("--otlp-endpoint %q: the scheme must be grpc, grpcs, http or https", s)
	}
	if e.grpc && strings.Trim(e.path, "/") != "" {
		return endpoint{}, fmt.Errorf("--otlp-endpoint %q: an OTLP/gRPC endpoint takes no path", s)
	}
	return e, nil
}

// Check refuses options Start would refuse, without starting anything.
func (o Options) Check() error {
	if o.Sample < 0 || o.Sample > 1 {
		return fmt.Errorf("--trace-sample %v: must be between 0 and 1", o.Sample)
	}
	if !o.On() {
		return nil
	}
	_, err := parseEndpoint(o.Endpoint)
	return err
}

// flushWait bounds how long a process's exit waits for the collector.
const flushWait = 5 * time.Second

// Start sets up the process's tracer provider and propagator for service
// (dexd, dexworker, ...). The returned function sends the spans still
// buffered, waiting a few seconds at most, and stops the exporter; with
// tracing off it does nothing.
func Start(ctx context.Context, service string, o Options) (shutdown func() error, err error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if !o.On() {
		return func() error { return nil }, nil
	}
	e, _ := parseEndpoint(o.Endpoint)
	exp, err := newExporter(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint %s: %w", o.Endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.Sample))),
		sdktrace.WithIDGenerator(IDs{}),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), flushWait)
		defer cancel()
		return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
	}, nil
}

func newExporter(ctx context.Context, e endpoint) (*otlptrace.Exporter, error) {
	if e.grpc {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(e.host)}
		if !e.tls {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(e.host)}
	if !e.tls {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if strings.Trim(e.path, "/") != "" {
		opts = append(opts, otlptracehttp.WithURLPath(e.path))
	}
	return otlptracehttp.New(ctx, opts...)
}

// ServerOptions are the gRPC server options that trace every call (none
// when tracing is off).
func (o Options) ServerOptions() []grpc.ServerOption {
	if !o.On() {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())}
}

// DialOptions are the gRPC client options that trace every call and carry
// its trace context (none when tracing is off).
func (o Options) DialOptions() []grpc.DialOption {
	if !o.On() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())}
}
