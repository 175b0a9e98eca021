package client

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestWorkerRegistersItsRunTimeouts(t *testing.T) {
	f := newFakeWorkers()
	nodes := startWorkerNodes(t, f, 1)
	tool := writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) { return ToolResult{}, nil })
	tool.Spec.RunTimeoutMs = 30_000
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{tool}, Model: ModelFuncs{}, ModelRunTimeout: 2 * time.Minute})
	f.waitFor(t, "the registration", func() bool { return f.lastRegister != nil })
	f.mu.Lock()
	req := f.lastRegister
	f.mu.Unlock()
	if req.ModelRunTimeoutMs != 120_000 || req.Tools[0].RunTimeoutMs != 30_000 {
		t.Fatalf("registered model run timeout %d ms, tool run timeout %d ms; want 120000 and 30000", req.ModelRunTimeoutMs, req.Tools[0].RunTimeoutMs)
	}
}

func TestWorkerRefusesABadModelRunTimeout(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 50 * 24 * time.Hour} {
		_, err := NewWorker(nil, WorkerOptions{Model: ModelFuncs{}, ModelRunTimeout: d})
		if err == nil || !strings.Contains(err.Error(), "model run timeout") {
			t.Errorf("model run timeout %s: error %v; want a refusal", d, err)
		}
	}
}
