package client

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestHoldReleasedByFileAndSignal(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.jsonl")
	sig := make(chan os.Signal, 1)
	m, err := ParseMoments("before-claim,tool-running")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseMoments("nap-time"); err == nil {
		t.Fatal("unknown moment accepted")
	}
	h := NewFileHolder(m, false, ledger, sig, &strings.Builder{})
	task := &dexv1.Task{Ref: &dexv1.AttemptRef{StepId: "st7"}}
	released := make(chan struct{})
	go func() { h.Hold("before-claim", task); close(released) }()
	waitFile(t, ledger+".held", "before-claim step=st7")
	if err := os.WriteFile(ledger+".release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-released
	if _, err := os.Stat(ledger + ".release"); !os.IsNotExist(err) {
		t.Fatal("release file not removed")
	}
	if _, err := os.Stat(ledger + ".held"); !os.IsNotExist(err) {
		t.Fatal("held file not removed")
	}
	// Held once only; other moments are not held.
	h.Hold("before-claim", task)
	h.Hold("after-claim", task)

	released = make(chan struct{})
	go func() { h.Hold("tool-running", task); close(released) }()
	waitFile(t, ledger+".held", "tool-running")
	sig <- os.Interrupt // stands for SIGUSR1
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("signal did not release")
	}
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never said %q", path, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// $DEX_HOLD holds a Worker given no Hold hook: at before-result the tool
// ran and its end line is written, and its result has not reached the
// cluster until the release.
func TestEnvHoldBeforeResultHoldsAfterTheEndLine(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	t.Setenv(LedgerEnv, ledger)
	t.Setenv(HoldEnv, "before-result")
	t.Setenv(HoldAllEnv, "")
	f := newFakeWorkers(toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE))
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		return ToolResult{Content: "saved"}, nil
	})}})
	waitFile(t, ledger+".held", "before-result step=st1 session=s1 kind=STEP_KIND_CALL_TOOL tool=save_note attempt=1")
	lines := readLedgerLines(t, ledger)
	if len(lines) != 2 || lines[1]["phase"] != LedgerEnd {
		t.Fatalf("ledger at the hold: %v, want its start and end lines", lines)
	}
	if _, _, completes, _ := f.snapshot(); completes != 0 {
		t.Fatal("the result reached the cluster before the release")
	}
	if err := os.WriteFile(ledger+".release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "complete", func() bool { return len(f.completes) == 1 })
}

// A bad $DEX_HOLD refuses to start the Worker, naming the variable.
func TestEnvHoldRefusesUnknownMomentOrNoLedger(t *testing.T) {
	tools := []Tool{writeTool("save_note", func(context.Context, ToolCall) (ToolResult, error) { return ToolResult{}, nil })}
	t.Setenv(LedgerEnv, filepath.Join(t.TempDir(), "ledger.jsonl"))
	t.Setenv(HoldEnv, "before-claim,nap-time")
	if _, err := NewWorker(nil, WorkerOptions{Tools: tools}); err == nil || !strings.Contains(err.Error(), HoldEnv) || !strings.Contains(err.Error(), "nap-time") {
		t.Fatalf("unknown moment: %v", err)
	}
	t.Setenv(LedgerEnv, "")
	t.Setenv(HoldEnv, "before-claim")
	if _, err := NewWorker(nil, WorkerOptions{Tools: tools}); err == nil || !strings.Contains(err.Error(), HoldEnv) || !strings.Contains(err.Error(), LedgerEnv) {
		t.Fatalf("no ledger: %v", err)
	}
	// A Hold hook given in code wins over the environment.
	if _, err := NewWorker(nil, WorkerOptions{Tools: tools, Hold: func(string, *dexv1.Task) {}}); err != nil {
		t.Fatalf("with a Hold hook: %v", err)
	}
}
