package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Errors that expose a provider's response headers, as the SDKs do.
type (
	// responseErr has an exported Response field, as openai-go's and
	// anthropic-sdk-go's errors have.
	responseErr struct {
		StatusCode int
		Response   *http.Response
	}
	headerMethodErr   struct{ h http.Header }
	respHeaderMethErr struct{ h http.Header }
)

func (e *responseErr) Error() string                    { return fmt.Sprintf("%d Too Many Requests", e.StatusCode) }
func (e headerMethodErr) Error() string                 { return "rate limited" }
func (e headerMethodErr) Header() http.Header           { return e.h }
func (e respHeaderMethErr) Error() string               { return "rate limited" }
func (e respHeaderMethErr) ResponseHeader() http.Header { return e.h }

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func with429(h http.Header) *responseErr {
	return &responseErr{StatusCode: 429, Response: &http.Response{StatusCode: 429, Header: h}}
}

func TestRetryAfterOf(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	date := now.Add(90 * time.Second).Format(http.TimeFormat)
	for _, c := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"nil", nil, 0},
		{"plain", errors.New("slow down"), 0},
		{"model error", &ModelError{Type: rateLimit, RetryAfter: 1500 * time.Millisecond}, 1500 * time.Millisecond},
		{"wrapped model error", fmt.Errorf("call: %w", &ModelError{Type: rateLimit, RetryAfter: 2 * time.Second}), 2 * time.Second},
		{"model error without one", &ModelError{Type: rateLimit}, 0},
		{"retry-after-ms", with429(headers("retry-after-ms", "250")), 250 * time.Millisecond},
		{"retry-after-ms fractional", with429(headers("retry-after-ms", "12.5")), 12500 * time.Microsecond},
		{"retry-after-ms before retry-after", with429(headers("retry-after-ms", "250", "retry-after", "1")), 250 * time.Millisecond},
		{"retry-after seconds", with429(headers("retry-after", "20")), 20 * time.Second},
		{"retry-after fractional seconds", with429(headers("retry-after", "1.5")), 1500 * time.Millisecond},
		{"retry-after HTTP date", with429(headers("retry-after", date)), 90 * time.Second},
		{"Header method", headerMethodErr{headers("retry-after", "3")}, 3 * time.Second},
		{"ResponseHeader method", respHeaderMethErr{headers("retry-after-ms", "40")}, 40 * time.Millisecond},
		{"wrapped", fmt.Errorf("run model: %w", with429(headers("retry-after", "7"))), 7 * time.Second},
		{"joined", errors.Join(errors.New("first"), headerMethodErr{headers("retry-after", "4")}), 4 * time.Second},
		{"bad retry-after-ms falls back", with429(headers("retry-after-ms", "soon", "retry-after", "2")), 2 * time.Second},
		{"bad retry-after", with429(headers("retry-after", "tomorrow")), 0},
		{"negative", with429(headers("retry-after", "-5")), 0},
		{"not a number", with429(headers("retry-after-ms", "NaN", "retry-after", "Inf")), 0},
		{"date passed", with429(headers("retry-after", now.Add(-time.Minute).Format(http.TimeFormat))), 0},
		{"capped", with429(headers("retry-after", "1e12")), maxRetryAfter},
		{"no response", &responseErr{StatusCode: 429}, 0},
		{"no header", with429(nil), 0},
	} {
		if got := retryAfterOf(c.err, now); got != c.want {
			t.Errorf("%s: retryAfterOf(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// A rate_limit failure's report carries the provider's Retry-After, in
// milliseconds rounded up; any other failure's does not.
func TestWorkerReportsRetryAfter(t *testing.T) {
	runModel := dexv1.StepKind_STEP_KIND_RUN_MODEL
	f := newFakeWorkers(
		modelTask("model-error", runModel),
		modelTask("sdk-header", runModel),
		modelTask("sub-ms", runModel),
		modelTask("server-error", runModel),
	)
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{
		Concurrency: 4,
		Model: ModelFuncs{Run: func(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error) {
			switch in.StepID {
			case "model-error":
				return nil, &ModelError{Type: rateLimit, Msg: "slow down", RetryAfter: 1500 * time.Millisecond}
			case "sdk-header":
				return nil, fmt.Errorf("provider: %w", with429(headers("retry-after", "2")))
			case "sub-ms":
				return nil, &ModelError{Type: rateLimit, RetryAfter: 1500 * time.Microsecond}
			default:
				return nil, &ModelError{Type: serverError, RetryAfter: time.Second}
			}
		}},
	})
	f.waitFor(t, "four fails", func() bool { return len(f.fails) == 4 })
	want := map[string]int64{"model-error": 1500, "sdk-header": 2000, "sub-ms": 2, "server-error": 0}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.fails {
		step := fl.Ref.StepId
		if got := fl.Result.GetFailure().GetRetryAfterMs(); got != want[step] {
			t.Errorf("step %s: retry_after_ms %d, want %d", step, got, want[step])
		}
	}
}

func TestRetryAfterOfHeader(t *testing.T) {
	if d := RetryAfterOfHeader(http.Header{"Retry-After": {"2"}}); d != 2*time.Second {
		t.Errorf("retry-after: 2 read as %s", d)
	}
	if d := RetryAfterOfHeader(http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}); d != 1500*time.Millisecond {
		t.Errorf("retry-after-ms: 1500 beside retry-after: 9 read as %s", d)
	}
	if d := RetryAfterOfHeader(nil); d != 0 {
		t.Errorf("no header read as %s", d)
	}
}
