package client

import (
	"context"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A model handler's output with a tool call that has no call id is never
// sent: the attempt fails at once, type unknown, with a reason naming the tool.
func TestWorkerFailsAModelOutputWithoutCallIDBeforeSending(t *testing.T) {
	model := &dexv1.Task{
		Ref: &dexv1.AttemptRef{StepId: "m1", Attempt: 1, Token: "tok-m1"}, SessionId: "s1",
		Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, HeartbeatIntervalMs: 20,
		Runner: dexv1.TaskRunner_TASK_RUNNER_MODEL, Handler: dexv1.TaskHandler_TASK_HANDLER_MODEL,
		ModelInput: &dexv1.ModelInput{},
	}
	f := newFakeWorkers(model)
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{
		Model: ModelFuncs{Run: func(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error) {
			return &dexv1.ModelOutput{ToolCalls: []*dexv1.ToolCall{{Tool: "lookup", Arguments: "{}"}}}, nil
		}},
	})
	f.waitFor(t, "the fail", func() bool { return len(f.fails) == 1 })
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.completes) != 0 {
		t.Fatalf("the output was sent: %v", f.completes)
	}
	fl := f.fails[0].Result.GetFailure()
	if fl.GetErrorType() != dexv1.ErrorType_ERROR_TYPE_UNKNOWN || !strings.Contains(fl.GetError(), `"lookup"`) || !strings.Contains(fl.GetError(), "no call id") {
		t.Fatalf("failure %v; want unknown, naming the tool and the missing call id", fl)
	}
}
