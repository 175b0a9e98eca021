package client

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// readLedgerLines reads a ledger as raw JSON objects.
func readLedgerLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestLedgerNotWrittenWithoutEnv(t *testing.T) {
	t.Setenv(LedgerEnv, "")
	f := newFakeWorkers(toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE))
	nodes := startWorkerNodes(t, f, 1)
	effect := make(chan error, 1)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		effect <- SideEffect(ctx, "notes.insert", c.IdempotencyKey)
		return ToolResult{Content: "saved"}, nil
	})}})
	f.waitFor(t, "complete", func() bool { return len(f.completes) == 1 })
	if err := <-effect; err != nil {
		t.Fatalf("SideEffect without a ledger: %v", err)
	}
	if err := SideEffect(context.Background(), "x", "k"); err != nil {
		t.Fatalf("SideEffect outside a handler: %v", err)
	}
}

// A ledger that cannot be opened: the Worker refuses to start.
func TestLedgerUnopenableRefusesToStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "ledger.jsonl")
	t.Setenv(LedgerEnv, path)
	_, err := NewWorker(nil, WorkerOptions{Tools: []Tool{writeTool("save_note", func(context.Context, ToolCall) (ToolResult, error) {
		return ToolResult{}, nil
	})}})
	if err == nil || !strings.Contains(err.Error(), LedgerEnv) || !strings.Contains(err.Error(), path) {
		t.Fatalf("NewWorker: %v, want an error naming %s and the path", err, LedgerEnv)
	}
}

// A start line that cannot be written (a full disk): the handler does not
// run and the attempt fails saying why.
func TestLedgerStartLineUnwritableFailsAttempt(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	t.Setenv(LedgerEnv, "/dev/full")
	f := newFakeWorkers(toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE))
	nodes := startWorkerNodes(t, f, 1)
	ran := make(chan struct{}, 1)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		ran <- struct{}{}
		return ToolResult{Content: "saved"}, nil
	})}})
	f.waitFor(t, "fail", func() bool { return len(f.fails) == 1 })
	select {
	case <-ran:
		t.Fatal("the handler ran without its start line")
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if msg := f.fails[0].GetResult().GetFailure().GetError(); !strings.Contains(msg, "ledger start line was not written") {
		t.Fatalf("failure %q", msg)
	}
}
