package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// serveSessions serves s as the node that serves clients.
func serveSessions(t *testing.T, s dexv1.SessionServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(client.HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	dexv1.RegisterSessionServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// waitingSessions answers one session that waits for an approval, an
// answer and a timer.
type waitingSessions struct{ fakeSessions }

func (w *waitingSessions) GetSession(ctx context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	if req.SessionId != "s1" {
		return w.fakeSessions.GetSession(ctx, req)
	}
	return &dexv1.GetSessionResponse{Session: &dexv1.Session{Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_WAITING}, Steps: []*dexv1.Step{
		{Id: "s1-2", Kind: dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL, Status: dexv1.StepStatus_STEP_STATUS_WAITING, CallId: "c1", Tool: "deploy", Arguments: `{"env":"prod"}`},
		{Id: "s1-3", Kind: dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER, Status: dexv1.StepStatus_STEP_STATUS_WAITING, CallId: "c2", Tool: "ask_user", Prompt: "Which region?"},
		{Id: "s1-4", Kind: dexv1.StepKind_STEP_KIND_AWAIT_TIMER, Status: dexv1.StepStatus_STEP_STATUS_WAITING, DueAtMs: 1_700_000_000_000},
		{Id: "s1-5", Kind: dexv1.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL, Status: dexv1.StepStatus_STEP_STATUS_DONE, Outcome: dexv1.Outcome_OUTCOME_UNKNOWN, CallId: "c3", Tool: "send_email", Arguments: `{"to":"x"}`},
	}}, nil
}

func TestSessionShow_SaysWhatWaitsAndTheCommandThatAnswersIt(t *testing.T) {
	addr := serveSessions(t, &waitingSessions{})
	out, err := run(t, "--addr", addr, "session", "show", "s1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"waiting for you:",
		"step s1-2: approve the call c1 of deploy?",
		`arguments: {"env":"prod"}`,
		"approve: dexctl --addr " + addr + " approve s1-2",
		"deny:    dexctl --addr " + addr + " deny s1-2 --reason 'why'",
		"step s1-3: question: Which region?",
		"answer:  dexctl --addr " + addr + " answer s1-3 'your answer'",
		"step s1-4: timer due at 2023-11-14T22:13:20Z",
		"reconcile: dexctl --addr " + addr + " reconcile s1-5 --outcome succeeded|failed",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("show lacks %q:\n%s", want, out)
		}
	}
	// JSON carries the arguments too.
	out, err = run(t, "--addr", addr, "session", "show", "s1", "--json")
	if err != nil || !strings.Contains(out, `"arguments": "{\"env\":\"prod\"}"`) {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"s1-2": "s1-2", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "x\x1b": `'x\x1b'`} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s; want %s", in, got, want)
		}
	}
}
