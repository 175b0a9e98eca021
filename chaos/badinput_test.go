//go:build e2e

package chaos

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Bad input against real nodes: a clear status and nothing changed.
func TestWorkers_BadInputGetsAClearStatusAndChangesNothing(t *testing.T) {
	e := newEnv(t, "--max-payload", "65536")
	conn, err := client.Dial(e.cluster.Target(), grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sessions := dexv1.NewSessionServiceClient(conn)
	workers := dexv1.NewWorkerServiceClient(conn)
	ctx := e.ctx(60 * time.Second)
	want := func(what string, err error, code codes.Code) {
		t.Helper()
		if status.Code(err) != code {
			t.Fatalf("%s: %v; want %s", what, err, code)
		}
		if msg := status.Convert(err).Message(); msg == "" {
			t.Fatalf("%s: no message", what)
		}
	}

	_, err = sessions.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "nope"})
	want("unknown session", err, codes.NotFound)
	_, err = sessions.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "nope", Text: "x", IdempotencyKey: "k"})
	want("message to an unknown session", err, codes.NotFound)
	_, err = sessions.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "nope", Text: "x"})
	want("message without a key", err, codes.InvalidArgument)
	_, err = sessions.ResolveApproval(ctx, &dexv1.ResolveApprovalRequest{StepId: "nope", Approved: true})
	want("approve an unknown step", err, codes.NotFound)
	_, err = sessions.ReconcileOutcome(ctx, &dexv1.ReconcileOutcomeRequest{StepId: "nope", Outcome: dexv1.Outcome_OUTCOME_UNKNOWN})
	want("reconcile to outcome_unknown", err, codes.InvalidArgument)
	_, err = sessions.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "big", Message: strings.Repeat("x", 70000)})
	want("a payload over --max-payload", err, codes.ResourceExhausted)
	if _, err := sessions.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "big"}); status.Code(err) != codes.NotFound {
		t.Fatalf("the oversized create left a session behind: %v", err)
	}
	_, err = workers.PollTask(ctx, &dexv1.PollTaskRequest{WorkerId: "never-registered", WaitMs: 10})
	want("poll of an unregistered Worker", err, codes.FailedPrecondition)
	_, err = workers.RegisterWorker(ctx, &dexv1.RegisterWorkerRequest{WorkerId: "w", Tools: []*dexv1.ToolSpec{{Name: "x"}}})
	want("a tool without a policy", err, codes.InvalidArgument)

	// A real attempt, then calls that name it wrongly.
	if _, err := workers.RegisterWorker(ctx, &dexv1.RegisterWorkerRequest{WorkerId: "manual", RunsModel: true}); err != nil {
		t.Fatal(err)
	}
	id := e.createSession("hello")
	poll, err := workers.PollTask(ctx, &dexv1.PollTaskRequest{WorkerId: "manual", WaitMs: 5000})
	if err != nil || len(poll.Tasks) != 1 {
		t.Fatalf("poll: %v %v", poll, err)
	}
	task := poll.Tasks[0]
	stale := &dexv1.AttemptRef{StepId: task.Ref.StepId, Attempt: task.Ref.Attempt, Token: task.Ref.Token + "-forged", Seq: 1}
	_, err = workers.ClaimTask(ctx, &dexv1.ClaimTaskRequest{Ref: stale})
	want("a forged attempt token", err, codes.FailedPrecondition)
	ahead := &dexv1.AttemptRef{StepId: task.Ref.StepId, Attempt: task.Ref.Attempt, Token: task.Ref.Token, Seq: 7}
	_, err = workers.ClaimTask(ctx, &dexv1.ClaimTaskRequest{Ref: ahead})
	want("a call from the future", err, codes.FailedPrecondition)
	first := &dexv1.AttemptRef{StepId: task.Ref.StepId, Attempt: task.Ref.Attempt, Token: task.Ref.Token, Seq: 1}
	_, err = workers.ReportTask(ctx, &dexv1.ReportTaskRequest{Ref: first,
		Result: &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ToolResult{ToolResult: &dexv1.ToolResult{Content: "x"}}}})
	want("a tool result for a RunModel step", err, codes.InvalidArgument)
	_, err = workers.ReportTask(ctx, &dexv1.ReportTaskRequest{Ref: first})
	want("a report with no result", err, codes.InvalidArgument)
	_, err = workers.CompleteTask(ctx, &dexv1.CompleteTaskRequest{Ref: first}) // an older Worker's call
	want("a deprecated CompleteTask with no result", err, codes.InvalidArgument)
	_, err = workers.CompleteTask(ctx, &dexv1.CompleteTaskRequest{Ref: first, Result: &dexv1.CompleteTaskRequest_Summary{Summary: "x"}})
	want("a deprecated CompleteTask with a summary for a RunModel step", err, codes.InvalidArgument)
	hb, err := workers.Heartbeat(ctx, &dexv1.HeartbeatRequest{Ref: stale})
	if err != nil || !hb.Cancelled {
		t.Fatalf("heartbeat with a forged token: %v %v; want cancelled", hb, err)
	}

	// No heartbeat: the attempt expires; its late claim is refused.
	e.waitFor(id, 20*time.Second, "the silent attempt expired", func(r *dexv1.GetSessionResponse) bool {
		a := r.Steps[0].Attempts[0]
		return a.Status == dexv1.AttemptStatus_ATTEMPT_STATUS_EXPIRED
	})
	_, err = workers.ClaimTask(ctx, &dexv1.ClaimTaskRequest{Ref: &dexv1.AttemptRef{StepId: task.Ref.StepId, Attempt: task.Ref.Attempt, Token: task.Ref.Token, Seq: 1}})
	want("a claim after expiry", err, codes.FailedPrecondition)
	r := e.get(id)
	if st := r.Steps[0]; len(st.Attempts) != 1 || st.Status != dexv1.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("after the refused calls the step is %s with %d attempts; want queued again with 1", st.Status, len(st.Attempts))
	}
}
