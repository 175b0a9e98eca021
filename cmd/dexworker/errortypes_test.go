package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A script names every error type the Worker library reports, unknown
// included; "none" stays a failure with no type.
func TestScriptedErrorTypes(t *testing.T) {
	for name, want := range map[string]dexv1.ErrorType{
		"unknown":         dexv1.ErrorType_ERROR_TYPE_UNKNOWN,
		"invalid_request": dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST,
		"network":         dexv1.ErrorType_ERROR_TYPE_NETWORK,
		"none":            dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED,
	} {
		m, _ := newModel(t, `{"turns": [{"match": "x", "outputs": [{"error": {"type": "`+name+`", "message": "scripted"}}]}]}`)
		_, err := m.RunModel(context.Background(), client.ModelInput{SessionID: "s", StepID: "st", Attempt: 1, History: hist(user("x"))})
		if err == nil || err.Error() != "scripted" {
			t.Fatalf("%s: error %v", name, err)
		}
		if got := client.ClassifyError(err); got != want {
			t.Errorf("%s: reported as %s, want %s", name, got, want)
		}
	}
}

// A scripted rate_limit error's retry_after_ms is the Retry-After the
// Worker library reports with it; the script refuses it on any other type.
func TestScriptedRetryAfter(t *testing.T) {
	m, _ := newModel(t, `{"turns": [{"match": "x", "outputs": [{"error": {"type": "rate_limit", "retry_after_ms": 1500}}]}]}`)
	_, err := m.RunModel(context.Background(), client.ModelInput{SessionID: "s", StepID: "st", Attempt: 1, History: hist(user("x"))})
	if got := client.ClassifyError(err); got != dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT {
		t.Fatalf("reported as %s, want rate_limit", got)
	}
	if got := client.RetryAfterOf(err); got != 1500*time.Millisecond {
		t.Fatalf("Retry-After %v, want 1.5s", got)
	}
	for bad, want := range map[string]string{
		`{"type": "server_error", "retry_after_ms": 100}`: `retry_after_ms is for a rate_limit error, not "server_error"`,
		`{"type": "rate_limit", "retry_after_ms": -1}`:    "negative retry_after_ms",
	} {
		_, err := ParseScript([]byte(`{"turns": [{"match": "x", "outputs": [{"error": ` + bad + `}]}]}`))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", bad, err, want)
		}
	}
}
