package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm/fsmpb"
)

type noDeadlines struct{}

func (noDeadlines) Heartbeat(*dexv1.AttemptRef) (bool, string) { return false, "" }
func (noDeadlines) Release(string, uint32)                     {}

// An older Worker's FailTask is served as a ReportTask: its failure is
// committed once, and a ReportTask repeating it answers as the first time.
func TestReportTask_AndTheDeprecatedFailTaskShareOnePath(t *testing.T) {
	node, ref := runningModelAttempt(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := NewWorkers(node, nil, noDeadlines{}, WorkerTiming{})

	for name, req := range map[string]*dexv1.ReportTaskRequest{
		"no ref":          {Result: &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_Summary{Summary: "x"}}},
		"no result":       {Ref: ref},
		"an empty result": {Ref: ref, Result: &dexv1.AttemptResult{}},
	} {
		if _, err := w.ReportTask(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: %v; want InvalidArgument", name, err)
		}
	}
	if _, err := w.FailTask(ctx, &dexv1.FailTaskRequest{Ref: ref, ErrorType: dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "slow down"}); err != nil {
		t.Fatal(err)
	}
	at := node.State().Step(ref.StepId).Attempts[0]
	if at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_FAILED || at.ErrorType != fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT || at.Error != "slow down" {
		t.Fatalf("attempt after FailTask: %v", at)
	}
	repeat := &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_Failure{Failure: &dexv1.AttemptFailure{Error: "slow down"}}}
	if _, err := w.ReportTask(ctx, &dexv1.ReportTaskRequest{Ref: ref, Result: repeat}); err != nil {
		t.Fatalf("a ReportTask repeating the FailTask: %v; want the first answer", err)
	}
	_, err := w.CompleteTask(ctx, &dexv1.CompleteTaskRequest{Ref: ref, Result: &dexv1.CompleteTaskRequest_ModelOutput{ModelOutput: &dexv1.ModelOutput{Text: "hi"}}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "was a fail, not a complete") {
		t.Fatalf("a complete at the seq of the fail: %v; want FailedPrecondition", err)
	}
	if n := len(node.State().Step(ref.StepId).Attempts); n != 1 {
		t.Fatalf("%d attempts; the repeats changed the step", n)
	}
}

// runningModelAttempt starts a node whose session "s" has its first RunModel
// handed to Worker w1 as attempt 1, and returns the attempt's ref (seq 1).
func runningModelAttempt(t *testing.T) (*cluster.Node, *dexv1.AttemptRef) {
	t.Helper()
	node, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w1", RunsModel: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	queued := node.State().StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_QUEUED)
	if len(queued) != 1 {
		t.Fatalf("%d queued steps; want the RunModel", len(queued))
	}
	res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: queued[0].Id, Attempt: 1, WorkerId: "w1", Epoch: node.Epoch(),
	}}})
	if err != nil || res.Err != nil {
		t.Fatalf("start: %v %v", err, res.Err)
	}
	return node, &dexv1.AttemptRef{StepId: queued[0].Id, Attempt: 1, Token: res.Attempt.Token, Seq: 1}
}
