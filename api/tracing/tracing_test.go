package tracing

import (
	"context"
	"strings"
	"testing"
)

// A malformed endpoint or sample is refused with the reason, before
// anything is set up; no endpoint is tracing off, with no gRPC handler.
func TestOptionsAreCheckedBeforeAnythingStarts(t *testing.T) {
	refused := map[Options]string{
		{Endpoint: "otel:4317", Sample: 1}:                  "want grpc://HOST:PORT",
		{Endpoint: "ftp://otel:4317", Sample: 1}:            "the scheme must be",
		{Endpoint: "grpc://otel:4317/v1/traces", Sample: 1}: "takes no path",
		{Endpoint: "grpc://otel:4317", Sample: 1.5}:         "--trace-sample 1.5",
		{Sample: -0.1}: "--trace-sample -0.1",
	}
	for o, want := range refused {
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%+v) = %v; want an error saying %q", o, err, want)
		}
		if _, err := Start(context.Background(), "test", o); err == nil {
			t.Errorf("Start(%+v) started", o)
		}
	}
	for _, ok := range []string{"grpc://otel:4317", "grpcs://otel:4317", "http://otel:4318", "https://otel:4318/custom/traces"} {
		if err := (Options{Endpoint: ok, Sample: 0.5}).Check(); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	off := Options{Sample: 1}
	if off.On() || off.ServerOptions() != nil || off.DialOptions() != nil {
		t.Fatal("tracing off still installs a gRPC handler")
	}
	stop, err := Start(context.Background(), "test", off)
	if err != nil || stop() != nil {
		t.Fatalf("off: %v", err)
	}
}
