package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func writeTool(name string, run ToolHandler) Tool {
	return Tool{Spec: &dexv1.ToolSpec{Name: name, Access: dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE}, Run: run}
}

func TestWorkerClaimsBeforeToolRuns(t *testing.T) {
	f := newFakeWorkers(toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE))
	nodes := startWorkerNodes(t, f, 1)
	var claimsSeen atomic.Int32
	var gotCall atomic.Value
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		_, claims, _, _ := f.snapshot()
		claimsSeen.Store(int32(claims))
		gotCall.Store(c)
		return ToolResult{Content: "saved"}, nil
	})}})
	f.waitFor(t, "complete", func() bool { return len(f.completes) == 1 })
	if claimsSeen.Load() != 1 {
		t.Fatalf("the tool ran after %d claims, want 1", claimsSeen.Load())
	}
	log, _, _, _ := f.snapshot()
	ci, hi := slices.Index(log, "claim 1@A"), slices.Index(log, "complete 2@A")
	if ci < 0 || hi < ci {
		t.Fatalf("want claim seq 1 then complete seq 2, got %v", log)
	}
	c := gotCall.Load().(ToolCall)
	if c.IdempotencyKey != "dex:s1:c-st1" || c.CallID != "c-st1" || c.SessionID != "s1" || c.Attempt != 1 {
		t.Fatalf("tool call %+v", c)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.completes[0].GetResult().GetToolResult().GetContent(); got != "saved" {
		t.Fatalf("result %q", got)
	}
	if f.completes[0].Ref.Token != "tok-st1" {
		t.Fatalf("token %q", f.completes[0].Ref.Token)
	}
}

func TestWorkerHeartbeatCancelStopsHandler(t *testing.T) {
	f := newFakeWorkers(toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE))
	f.hbCancelled = true
	nodes := startWorkerNodes(t, f, 1)
	stopped := make(chan error, 1)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		<-ctx.Done()
		stopped <- ctx.Err()
		return ToolResult{Content: "too late"}, nil
	})}})
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler ctx ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler was not cancelled")
	}
	time.Sleep(200 * time.Millisecond)
	log, claims, completes, fails := f.snapshot()
	if claims != 1 || completes != 0 || fails != 0 {
		t.Fatalf("claims %d completes %d fails %d, want 1 0 0; log %v", claims, completes, fails, log)
	}
}

func TestWorkerRetriesCompleteWithSameSeq(t *testing.T) {
	f := newFakeWorkers(toolTask("st1", "lookup", dexv1.ToolAccess_TOOL_ACCESS_READ))
	f.completeUnavailable = 2
	nodes := startWorkerNodes(t, f, 1)
	var runs atomic.Int32
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{{
		Spec: &dexv1.ToolSpec{Name: "lookup", Access: dexv1.ToolAccess_TOOL_ACCESS_READ},
		Run: func(ctx context.Context, c ToolCall) (ToolResult, error) {
			runs.Add(1)
			return ToolResult{Content: "found"}, nil
		},
	}}})
	f.waitFor(t, "three completes", func() bool { return len(f.completes) == 3 })
	time.Sleep(100 * time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.completes) != 3 {
		t.Fatalf("%d completes, want 3", len(f.completes))
	}
	for _, c := range f.completes {
		if c.Ref.Seq != 2 || c.Ref.Token != "tok-st1" || c.Ref.Attempt != 1 {
			t.Fatalf("complete ref %v, want seq 2 of attempt 1", c.Ref)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times", runs.Load())
	}
}

// A takeover while the tool runs: the Worker keeps its task, heartbeats the
// new lease holder and completes there with the same seq.
func TestWorkerFollowsTakeover(t *testing.T) {
	f := newFakeWorkers(toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE))
	nodes := startWorkerNodes(t, f, 3)
	release := make(chan struct{})
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		select {
		case <-release:
			return ToolResult{Content: "saved"}, nil
		case <-ctx.Done():
			return ToolResult{}, ctx.Err()
		}
	})}})
	f.waitFor(t, "claim on A", func() bool { return len(f.claims) == 1 })
	nodes[0].setServing(false)
	time.Sleep(100 * time.Millisecond) // no lease holder for a while
	nodes[2].setServing(true)
	f.waitFor(t, "heartbeat on C", func() bool { return slices.Contains(f.log, "hb 1@C") })
	close(release)
	f.waitFor(t, "complete on C", func() bool { return slices.Contains(f.log, "complete 2@C") })
	log, claims, _, fails := f.snapshot()
	if claims != 1 || fails != 0 {
		t.Fatalf("claims %d fails %d; log %v", claims, fails, log)
	}
}

func TestWorkerModelErrorTypeAndUnknownTool(t *testing.T) {
	model := &dexv1.Task{
		Ref: &dexv1.AttemptRef{StepId: "m1", Attempt: 1, Token: "tok-m1"}, SessionId: "s1",
		Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, HeartbeatIntervalMs: 20,
		Runner: dexv1.TaskRunner_TASK_RUNNER_MODEL, Handler: dexv1.TaskHandler_TASK_HANDLER_MODEL,
		ModelInput: &dexv1.ModelInput{History: []*dexv1.HistoryEntry{{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "hi"}}},
	}
	f := newFakeWorkers(model, toolTask("st2", "nope", dexv1.ToolAccess_TOOL_ACCESS_READ))
	nodes := startWorkerNodes(t, f, 1)
	var moments []string
	var mm = make(chan string, 100)
	runWorker(t, nodes, WorkerOptions{
		Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) { return ToolResult{}, nil })},
		Model: ModelFuncs{Run: func(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error) {
			if len(in.History) != 1 || in.History[0].Text != "hi" {
				return nil, errors.New("bad input")
			}
			return nil, &ModelError{Type: dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT, Msg: "slow down"}
		}},
		Hold: func(m string, task *dexv1.Task) { mm <- m + ":" + task.Ref.StepId },
	})
	f.waitFor(t, "two fails", func() bool { return len(f.fails) == 2 })
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.fails {
		switch fl.Ref.StepId {
		case "m1":
			if fl.Result.GetFailure().GetErrorType() != dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT || fl.Result.GetFailure().GetError() != "slow down" || fl.Ref.Seq != 2 {
				t.Fatalf("model fail %v", fl)
			}
		case "st2":
			if fl.Ref.Seq != 1 || !strings.Contains(fl.Result.GetFailure().GetError(), `no tool "nope"`) {
				t.Fatalf("unknown tool fail %v", fl)
			}
		}
	}
	for _, c := range f.claims {
		if c.StepId == "st2" {
			t.Fatal("a task for an unknown tool was claimed")
		}
	}
	close(mm)
	for m := range mm {
		moments = append(moments, m)
	}
	// before-result too: the failed model handler returned, its failure not
	// sent yet.
	want := []string{"before-claim:m1", "after-claim:m1", "before-model:m1", "before-result:m1"}
	if !slices.Equal(moments, want) {
		t.Fatalf("moments %v, want %v", moments, want)
	}
}

// A Worker the cluster deregistered (its TTL ran out) registers again on the
// refusal of its next poll, then gets its tasks.
func TestWorkerRegistersAgainWhenDeregistered(t *testing.T) {
	f := newFakeWorkers(toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE))
	f.unknownPolls = 1
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		return ToolResult{Content: "saved"}, nil
	})}})
	f.waitFor(t, "complete", func() bool { return len(f.completes) == 1 })
	log, _, _, _ := f.snapshot()
	refused, again := slices.Index(log, "poll refused@A"), slices.Index(log[1:], "register@A")
	if log[0] != "register@A" || refused < 0 || again+1 <= refused {
		t.Fatalf("want register, refused poll, register again; got %v", log)
	}
}
