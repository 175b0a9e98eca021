package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A model output with a tool call that has no call id, or two calls with one
// id, is refused before anything is logged, and the attempt is left as it was.
func TestReportTask_RefusesToolCallsWithoutUniqueCallIDs(t *testing.T) {
	node, ref := runningModelAttempt(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := NewWorkers(node, nil, noDeadlines{}, WorkerTiming{})
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
	if at := node.State().Step(ref.StepId).Attempts[0]; at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING || at.LastSeq != 0 {
		t.Fatalf("attempt after the refusals: %v; want it running, no call logged", at)
	}
	if _, err := w.ReportTask(ctx, output(&dexv1.ToolCall{CallId: "c1", Tool: "lookup"})); err != nil {
		t.Fatalf("a good output at the same seq: %v", err)
	}
}
