package client

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestWorkerMetricsCountTasksByOutcome(t *testing.T) {
	model := &dexv1.Task{
		Ref: &dexv1.AttemptRef{StepId: "m1", Attempt: 1, Token: "tok-m1"}, SessionId: "s1",
		Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, HeartbeatIntervalMs: 20,
		Runner: dexv1.TaskRunner_TASK_RUNNER_MODEL, Handler: dexv1.TaskHandler_TASK_HANDLER_MODEL,
		ModelInput: &dexv1.ModelInput{History: []*dexv1.HistoryEntry{{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "hi"}}},
	}
	f := newFakeWorkers(model, toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE), toolTask("st2", "nope", dexv1.ToolAccess_TOOL_ACCESS_READ))
	nodes := startWorkerNodes(t, f, 1)
	m := NewWorkerMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	runWorker(t, nodes, WorkerOptions{
		Metrics: m,
		Tools:   []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) { return ToolResult{Content: "saved"}, nil })},
		Model: ModelFuncs{Run: func(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error) {
			return nil, &ModelError{Type: dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT, Msg: "slow down"}
		}},
	})
	count := func(kind, outcome string) float64 { return testutil.ToFloat64(m.tasks.WithLabelValues(kind, outcome)) }
	f.waitFor(t, "three tasks counted", func() bool {
		return count("run_model", "failed") == 1 && count("call_tool", "completed") == 1 && count("call_tool", "cannot_run") == 1
	})
	if n := testutil.CollectAndCount(m.handler); n != 2 {
		t.Fatalf("%d handler duration series; want 2 (run_model error, call_tool ok)", n)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}
