package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

const (
	unspecified    = dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED
	invalidRequest = dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST
	contextLength  = dexv1.ErrorType_ERROR_TYPE_CONTEXT_LENGTH
	rateLimit      = dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT
	overloaded     = dexv1.ErrorType_ERROR_TYPE_OVERLOADED
	serverError    = dexv1.ErrorType_ERROR_TYPE_SERVER_ERROR
	timeout        = dexv1.ErrorType_ERROR_TYPE_TIMEOUT
	network        = dexv1.ErrorType_ERROR_TYPE_NETWORK
	unknown        = dexv1.ErrorType_ERROR_TYPE_UNKNOWN
)

func TestErrorTypeForHTTPStatus(t *testing.T) {
	for _, c := range []struct {
		status int
		msg    string
		want   dexv1.ErrorType
	}{
		{400, `{"error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`, invalidRequest},
		{404, "model not found", invalidRequest},
		{422, "unprocessable", invalidRequest},
		{413, "request entity too large", invalidRequest},
		{400, `{"error":{"code":"context_length_exceeded","message":"..."}}`, contextLength},
		{400, "This model's maximum context length is 128000 tokens.", contextLength},
		{400, "prompt is too long: 210000 tokens > 200000 maximum", contextLength},
		{400, "Too many tokens in the request", contextLength},
		{400, "the input exceeds the model's context window", contextLength},
		{400, "Input is too long for requested model.", contextLength},
		{413, "Prompt Is Too Long", contextLength},
		{422, "The input token count exceeds the maximum number of tokens allowed", contextLength},
		{429, "rate limit exceeded", rateLimit},
		{429, "prompt is too long", rateLimit},
		{529, "", overloaded},
		{503, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, overloaded},
		{503, "service unavailable", serverError},
		{500, "internal error", serverError},
		{502, "bad gateway", serverError},
		{599, "", serverError},
		{408, "request timeout", timeout},
		{504, "gateway timeout", timeout},
		{401, "invalid api key", unknown},
		{403, "forbidden", unknown},
		{200, "", unknown},
		{0, "", unknown},
	} {
		if got := ErrorTypeForHTTPStatus(c.status, c.msg); got != c.want {
			t.Errorf("ErrorTypeForHTTPStatus(%d, %q) = %s, want %s", c.status, c.msg, got, c.want)
		}
		me := NewHTTPModelError(c.status, c.msg)
		if me.Type != c.want || me.Msg != c.msg {
			t.Errorf("NewHTTPModelError(%d, %q) = %+v, want type %s", c.status, c.msg, me, c.want)
		}
	}
}

// Errors shaped like the provider SDKs' errors.
type (
	statusMethodErr  struct{ code int }
	httpStatusErr    struct{ code int }
	httpStatusCodeEr struct{ code int }
	// sdkErr has an exported StatusCode field (0 when no answer came) and
	// wraps the transport's error.
	sdkErr struct {
		StatusCode int
		Message    string
		cause      error
	}
	timeoutErr struct{}
)

func (e statusMethodErr) Error() string        { return "provider error" }
func (e statusMethodErr) StatusCode() int      { return e.code }
func (e httpStatusErr) Error() string          { return "provider error" }
func (e httpStatusErr) HTTPStatus() int        { return e.code }
func (e httpStatusCodeEr) Error() string       { return "operation error: https response error" }
func (e httpStatusCodeEr) HTTPStatusCode() int { return e.code }
func (e *sdkErr) Error() string                { return fmt.Sprintf("%d: %s", e.StatusCode, e.Message) }
func (e *sdkErr) Unwrap() error                { return e.cause }
func (timeoutErr) Error() string               { return "i/o timeout" }
func (timeoutErr) Timeout() bool               { return true }
func (timeoutErr) Temporary() bool             { return true }

// refusedDial is a real connection refused on 127.0.0.1: a port whose
// listener is closed.
func refusedDial(t *testing.T) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	conn, err := net.Dial("tcp", addr)
	if err == nil {
		_ = conn.Close()
		t.Skip("the closed port accepted a connection")
	}
	return err
}

func TestClassifyError(t *testing.T) {
	refused := refusedDial(t)
	for _, c := range []struct {
		name string
		err  error
		want dexv1.ErrorType
	}{
		{"nil", nil, unspecified},
		{"plain", errors.New("provider said no"), unknown},
		{"model error", &ModelError{Type: rateLimit, Msg: "slow down"}, rateLimit},
		{"wrapped model error", fmt.Errorf("call provider: %w", NewHTTPModelError(400, "context_length_exceeded")), contextLength},
		{"untyped model error stays untyped", &ModelError{Msg: "no type on purpose"}, unspecified},
		{"deadline", context.DeadlineExceeded, timeout},
		{"wrapped deadline", fmt.Errorf("stream: %w", context.DeadlineExceeded), timeout},
		{"net timeout", fmt.Errorf("read: %w", timeoutErr{}), timeout},
		{"url timeout", &url.Error{Op: "Post", URL: "https://api.example.com", Err: timeoutErr{}}, timeout},
		{"cancelled", context.Canceled, unknown},
		{"connection refused", refused, network},
		{"wrapped connection refused", fmt.Errorf("post: %w", refused), network},
		{"reset", fmt.Errorf("read body: %w", syscall.ECONNRESET), network},
		{"dns", &net.DNSError{Err: "no such host", Name: "api.example.com", IsNotFound: true}, network},
		{"unexpected eof", fmt.Errorf("decode: %w", io.ErrUnexpectedEOF), network},
		{"url error", &url.Error{Op: "Post", URL: "https://api.example.com", Err: io.EOF}, network},
		{"StatusCode method", statusMethodErr{429}, rateLimit},
		{"HTTPStatus method", fmt.Errorf("x: %w", httpStatusErr{500}), serverError},
		{"HTTPStatusCode method", httpStatusCodeEr{504}, timeout},
		{"StatusCode field", &sdkErr{StatusCode: 400, Message: "bad request"}, invalidRequest},
		{"StatusCode field with context text", fmt.Errorf("run: %w", &sdkErr{StatusCode: 400, Message: "prompt is too long"}), contextLength},
		{"StatusCode field overloaded", &sdkErr{StatusCode: 503, Message: "Overloaded"}, overloaded},
		{"StatusCode field unset, reset underneath", &sdkErr{Message: "no answer", cause: syscall.ECONNRESET}, network},
		{"StatusCode field unset", &sdkErr{Message: "odd"}, unknown},
		{"status field value", sdkErrValue{StatusCode: 529}, overloaded},
		{"joined", errors.Join(errors.New("first"), statusMethodErr{429}), rateLimit},
		{"panic text", fmt.Errorf("handler panicked: %v", "boom"), unknown},
	} {
		if got := ClassifyError(c.err); got != c.want {
			t.Errorf("%s: ClassifyError(%v) = %s, want %s", c.name, c.err, got, c.want)
		}
	}
}

type sdkErrValue struct{ StatusCode int }

func (e sdkErrValue) Error() string { return fmt.Sprintf("status %d", e.StatusCode) }

func TestToolCallNotRunErrorPrefix(t *testing.T) {
	if ToolCallNotRunErrorPrefix != wirerules.NotRunPrefix || !strings.HasPrefix(ToolCallNotRunErrorPrefix, "the tool did not run") {
		t.Fatalf("prefix %q", ToolCallNotRunErrorPrefix)
	}
}

func modelTask(step string, kind dexv1.StepKind) *dexv1.Task {
	handler := dexv1.TaskHandler_TASK_HANDLER_MODEL
	if kind == dexv1.StepKind_STEP_KIND_COMPACT_CONTEXT {
		handler = dexv1.TaskHandler_TASK_HANDLER_COMPACT
	}
	return &dexv1.Task{
		Ref: &dexv1.AttemptRef{StepId: step, Attempt: 1, Token: "tok-" + step}, SessionId: "s1",
		Kind: kind, Runner: dexv1.TaskRunner_TASK_RUNNER_MODEL, Handler: handler, HeartbeatIntervalMs: 20,
		ModelInput: &dexv1.ModelInput{History: []*dexv1.HistoryEntry{{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: step}}},
	}
}

// What a Worker reports for each way a handler fails: model errors are
// classified (a plain error or a panic is unknown), a tool's plain error
// stays untyped.
func TestWorkerReportsClassifiedModelErrors(t *testing.T) {
	runModel := dexv1.StepKind_STEP_KIND_RUN_MODEL
	f := newFakeWorkers(
		modelTask("plain", runModel),
		modelTask("http429", runModel),
		modelTask("wrapped-deadline", runModel),
		modelTask("panic", runModel),
		modelTask("compact-plain", dexv1.StepKind_STEP_KIND_COMPACT_CONTEXT),
		toolTask("tool-plain", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE),
	)
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{
		Concurrency: 6,
		Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
			return ToolResult{}, errors.New("disk full")
		})},
		Model: ModelFuncs{
			Run: func(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error) {
				switch in.StepID {
				case "plain":
					return nil, errors.New("provider answered 400")
				case "http429":
					return nil, NewHTTPModelError(429, "rate limit exceeded")
				case "wrapped-deadline":
					return nil, fmt.Errorf("call provider: %w", context.DeadlineExceeded)
				default:
					panic("model bug")
				}
			},
			CompactFunc: func(ctx context.Context, in ModelInput) (string, error) {
				return "", errors.New("summary failed")
			},
		},
	})
	f.waitFor(t, "six fails", func() bool { return len(f.fails) == 6 })
	want := map[string]dexv1.ErrorType{
		"plain": unknown, "http429": rateLimit, "wrapped-deadline": timeout, "panic": unknown,
		"compact-plain": unknown, "tool-plain": unspecified,
	}
	wantText := map[string]string{
		"plain": "provider answered 400", "http429": "rate limit exceeded", "panic": "handler panicked: model bug",
		"compact-plain": "summary failed", "tool-plain": "disk full",
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.fails {
		step := fl.Ref.StepId
		got := fl.Result.GetFailure()
		if got.GetErrorType() != want[step] || fl.Ref.Seq != 2 {
			t.Errorf("step %s: failed with %s (seq %d), want %s (seq 2)", step, got.GetErrorType(), fl.Ref.Seq, want[step])
		}
		if w, ok := wantText[step]; ok && got.GetError() != w {
			t.Errorf("step %s: error %q, want %q", step, got.GetError(), w)
		}
		delete(want, step)
	}
	if len(want) != 0 {
		t.Errorf("no failure reported for %v", want)
	}
}

// A model handler that the Worker itself cancels (its shutdown grace is
// over) is reported with no type, as a crash would be: not unknown.
func TestWorkerShutdownCancelledModelIsUntyped(t *testing.T) {
	f := newFakeWorkers(modelTask("m1", dexv1.StepKind_STEP_KIND_RUN_MODEL))
	nodes := startWorkerNodes(t, f, 1)
	conn, err := Dial(target(nodes))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	started := make(chan struct{})
	w, err := NewWorker(conn, WorkerOptions{
		ID: "w1", PollWait: 100 * time.Millisecond, CallTimeout: time.Second, ShutdownGrace: 50 * time.Millisecond,
		Model: ModelFuncs{Run: func(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error) {
			close(started)
			<-ctx.Done()
			return nil, fmt.Errorf("provider call: %w", ctx.Err())
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the model handler did not start")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.fails) != 1 {
		t.Fatalf("%d fails, want 1; log %v", len(f.fails), f.log)
	}
	if got := f.fails[0].Result.GetFailure().GetErrorType(); got != unspecified {
		t.Fatalf("a model cancelled by the Worker's shutdown failed with %s, want no type", got)
	}
}
