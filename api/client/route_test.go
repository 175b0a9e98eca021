package client

import (
	"context"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A task runs the handler its handler field names, whatever its kind says:
// the cluster decides, the Worker keeps no table of kinds.
func TestWorkerRoutesATaskByItsHandler(t *testing.T) {
	poll := toolTask("p1", "render", dexv1.ToolAccess_TOOL_ACCESS_READ)
	poll.Kind, poll.Handler, poll.TaskId = dexv1.StepKind_STEP_KIND_UNSPECIFIED, dexv1.TaskHandler_TASK_HANDLER_POLL, "job-7"
	f := newFakeWorkers(poll)
	nodes := startWorkerNodes(t, f, 1)
	polled := make(chan string, 1)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{{
		Spec: &dexv1.ToolSpec{Name: "render", Access: dexv1.ToolAccess_TOOL_ACCESS_READ, LongRunning: true},
		Run: func(context.Context, ToolCall) (ToolResult, error) {
			t.Error("the run handler ran for a poll task")
			return ToolResult{}, nil
		},
		Poll: func(_ context.Context, c ToolCall) (bool, ToolResult, error) {
			polled <- c.TaskID
			return true, ToolResult{Content: "rendered"}, nil
		},
	}}})
	f.waitFor(t, "the poll's result", func() bool { return len(f.completes) == 1 })
	if id := <-polled; id != "job-7" {
		t.Fatalf("polled task %q, want job-7", id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if pr := f.completes[0].Result.GetPollResult(); !pr.GetDone() || pr.GetResult().GetContent() != "rendered" {
		t.Fatalf("poll task completed with %v, want a done PollResult", f.completes[0].Result)
	}
}

// A task that does not say how it runs (a server older than the Worker
// library), or says it inconsistently, fails unclaimed with the reason:
// nothing ran, so the cluster records the call as not run.
func TestWorkerRefusesATaskThatDoesNotSayHowItRuns(t *testing.T) {
	old := toolTask("old", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
	old.Runner, old.Handler = dexv1.TaskRunner_TASK_RUNNER_UNSPECIFIED, dexv1.TaskHandler_TASK_HANDLER_UNSPECIFIED
	mixed := toolTask("mixed", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
	mixed.Runner = dexv1.TaskRunner_TASK_RUNNER_MODEL
	noHandler := toolTask("nohandler", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
	noHandler.Handler = dexv1.TaskHandler_TASK_HANDLER_UNSPECIFIED
	f := newFakeWorkers(old, mixed, noHandler)
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{
		Tools: []Tool{writeTool("save_note", func(context.Context, ToolCall) (ToolResult, error) {
			t.Error("a task that does not say how it runs ran")
			return ToolResult{}, nil
		})},
		Model: ModelFuncs{Run: func(context.Context, ModelInput) (*dexv1.ModelOutput, error) {
			t.Error("the model ran for a tool task")
			return &dexv1.ModelOutput{}, nil
		}},
	})
	f.waitFor(t, "three fails", func() bool { return len(f.fails) == 3 })
	want := map[string]string{
		"old":       "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: the task names no runner and no handler (a Dex server older than this Worker library sent it)",
		"mixed":     "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: runner TASK_RUNNER_MODEL has no handler TASK_HANDLER_TOOL",
		"nohandler": "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: runner TASK_RUNNER_TOOL has no handler TASK_HANDLER_UNSPECIFIED",
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.fails {
		step := fl.Ref.StepId
		if got := fl.Result.GetFailure().GetError(); got != want[step] || fl.Ref.Seq != 1 {
			t.Errorf("%s failed at seq %d with %q, want seq 1 and %q", step, fl.Ref.Seq, got, want[step])
		}
	}
	if len(f.claims) != 0 || len(f.completes) != 0 {
		t.Fatalf("%d claims, %d completes; want the tasks refused unclaimed", len(f.claims), len(f.completes))
	}
}
