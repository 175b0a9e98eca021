package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A model output with a tool call that has no call id, or two calls with one
// id, is refused before anything is logged, and the attempt is left as it was.
func TestReportTask_RefusesToolCallsWithoutUniqueCallIDs(t *testing.T) {
	node, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := node.Propose(ctx, &dexv1.Command{Body: &dexv1.Command_RegisterWorker{RegisterWorker: &dexv1.RegisterWorker{WorkerId: "w1", RunsModel: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	queued := node.State().StepsWithStatus(dexv1.StepStatus_STEP_STATUS_QUEUED)
	if len(queued) != 1 {
		t.Fatalf("%d queued steps; want the RunModel", len(queued))
	}
	res, err := node.Propose(ctx, &dexv1.Command{Body: &dexv1.Command_StartAttempt{StartAttempt: &dexv1.StartAttempt{
		StepId: queued[0].Id, Attempt: 1, WorkerId: "w1", Epoch: node.Epoch(),
	}}})
	if err != nil || res.Err != nil {
		t.Fatalf("start: %v %v", err, res.Err)
	}
	ref := &dexv1.AttemptRef{StepId: queued[0].Id, Attempt: 1, Token: res.Attempt.Token, Seq: 1}
	w := NewWorkers(node, nil, noLeases{}, WorkerTiming{})
	output := func(calls ...*dexv1.ToolCall) *dexv1.ReportTaskRequest {
		return &dexv1.ReportTaskRequest{Ref: ref, Result: &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ModelOutput{
			ModelOutput: &dexv1.ModelOutput{Text: "calling", ToolCalls: calls},
		}}}
	}

	logged := node.Raft().LastIndex()
	for name, tc := range map[string]struct {
		req  *dexv1.ReportTaskRequest
		want []string
	}{
		"no call id": {output(&dexv1.ToolCall{Tool: "lookup", Arguments: "{}"}),
			[]string{`"lookup"`, "no call id"}},
		"duplicate call ids": {output(&dexv1.ToolCall{CallId: "c1", Tool: "lookup"}, &dexv1.ToolCall{CallId: "c1", Tool: "save_note"}),
			[]string{`"c1"`, "twice", `"save_note"`}},
	} {
		_, err := w.ReportTask(ctx, tc.req)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: %v; want InvalidArgument", name, err)
		}
		for _, s := range tc.want {
			if !strings.Contains(status.Convert(err).Message(), s) {
				t.Errorf("%s: %q does not say %s", name, status.Convert(err).Message(), s)
			}
		}
	}
	if now := node.Raft().LastIndex(); now != logged {
		t.Fatalf("the log grew from %d to %d: a refused output was proposed", logged, now)
	}
	if at := node.State().Step(ref.StepId).Attempts[0]; at.Status != dexv1.AttemptStatus_ATTEMPT_STATUS_RUNNING || at.LastSeq != 0 {
		t.Fatalf("attempt after the refusals: %v; want it running, no call logged", at)
	}
	if _, err := w.ReportTask(ctx, output(&dexv1.ToolCall{CallId: "c1", Tool: "lookup"})); err != nil {
		t.Fatalf("a good output at the same seq: %v", err)
	}
}
