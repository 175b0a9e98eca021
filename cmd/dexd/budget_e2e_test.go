//go:build e2e

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// budgetShown is what dexctl session show --json says of a session's
// pause, usage and budget.
type budgetShown struct {
	Status       string `json:"status"`
	PauseReason  string `json:"pause_reason"`
	PauseMessage string `json:"pause_message"`
	Usage        struct {
		InputTokens  uint64 `json:"input_tokens"`
		OutputTokens uint64 `json:"output_tokens"`
		CostMicros   uint64 `json:"cost_micros"`
		ModelCalls   uint64 `json:"model_calls"`
		ToolCalls    uint64 `json:"tool_calls"`
	} `json:"usage"`
	Budget struct {
		MaxTokens uint64 `json:"max_tokens"`
	} `json:"budget"`
}

func showBudget(t *testing.T, addrs []string, id string) (*budgetShown, error) {
	out, err := dexctl(t, addrs, "session", "show", id, "--json")
	if err != nil {
		return nil, err
	}
	var s budgetShown
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ledgerCalls counts the ledger lines of session whose tool is tool
// ("model" for model calls).
func ledgerCalls(t *testing.T, ledger, session, tool string) int {
	t.Helper()
	return ledgerCount(t, ledger, func(e ledgerLine) bool { return e.Session == session && e.Tool == tool })
}

func waitPaused(t *testing.T, addrs []string, id, reason string) *budgetShown {
	t.Helper()
	var got *budgetShown
	waitUntil(t, 60*time.Second, "session "+id+" paused for "+reason, func() (bool, string) {
		s, err := showBudget(t, addrs, id)
		if err != nil {
			return false, err.Error()
		}
		got = s
		return s.Status == "paused" && s.PauseReason == reason, s.Status + " " + s.PauseReason
	})
	return got
}

// With real processes: a session whose model calls spend its token budget
// pauses with its tool call recorded and no further model call; a raised
// budget and a resume finish its turn. A session that makes the same tool
// call over and over pauses at the loop limit, having run it exactly that
// many times, as the Worker's ledger shows.
func TestBudgetAndLoopPausesWithRealProcesses(t *testing.T) {
	c := newTestCluster(t)
	c.startAll(t)
	dir := t.TempDir()
	script := map[string]any{"turns": []any{
		map[string]any{"match": "spend", "outputs": []any{
			map[string]any{"tool_calls": []any{map[string]any{"tool": "lookup", "arguments": map[string]any{"q": "price"}}},
				"usage": map[string]any{"input_tokens": 400, "output_tokens": 100, "cost_micros": 900}},
			map[string]any{"text": "Done."},
		}},
		map[string]any{"match": "loop", "outputs": []any{
			map[string]any{"always": true, "tool_calls": []any{map[string]any{"tool": "lookup", "arguments": map[string]any{"q": "same"}}}},
		}},
	}}
	path := writeScript(t, dir, script)
	ledger := filepath.Join(dir, "ledger.jsonl")
	runDexworker(t, c, dir, "--ledger", ledger, "--script", path, "--poll-wait", "2s")

	spend := startIn(t, strings.Join(c.grpc, ","), "--message", "spend", "--budget", "max_tokens=300")
	s := waitPaused(t, c.grpc, spend, "budget")
	if s.Usage.InputTokens != 400 || s.Usage.OutputTokens != 100 || s.Usage.CostMicros != 900 || s.Usage.ToolCalls != 1 || s.Usage.ModelCalls != 1 {
		t.Fatalf("usage %+v; want the one model call's 400+100 tokens, cost 900, and its tool call", s.Usage)
	}
	if !strings.Contains(s.PauseMessage, "budget of 300 tokens") {
		t.Fatalf("pause message %q", s.PauseMessage)
	}
	if m, l := ledgerCalls(t, ledger, spend, "model"), ledgerCalls(t, ledger, spend, "lookup"); m != 1 || l != 1 {
		t.Fatalf("the ledger has %d model calls and %d lookups; want 1 and 1 before the pause", m, l)
	}
	if out, err := dexctl(t, c.grpc, "session", "budget", spend, "max_tokens=10000"); err != nil || !strings.Contains(string(out), "max_tokens=10000") {
		t.Fatalf("session budget: %v %s", stderrOf(err), out)
	}
	time.Sleep(500 * time.Millisecond)
	if s, err := showBudget(t, c.grpc, spend); err != nil || s.Status != "paused" {
		t.Fatalf("after the raise alone: %+v %v; want still paused", s, err)
	}
	if _, err := dexctl(t, c.grpc, "resume", spend); err != nil {
		t.Fatalf("resume: %v", stderrOf(err))
	}
	waitUntil(t, 60*time.Second, "the resumed session idle", func() (bool, string) {
		s, err := showBudget(t, c.grpc, spend)
		if err != nil {
			return false, err.Error()
		}
		return s.Status == "idle", s.Status
	})
	if m, l := ledgerCalls(t, ledger, spend, "model"), ledgerCalls(t, ledger, spend, "lookup"); m != 2 || l != 1 {
		t.Fatalf("after the resume the ledger has %d model calls and %d lookups; want 2 and 1", m, l)
	}

	loop := startIn(t, strings.Join(c.grpc, ","), "--message", "loop")
	s = waitPaused(t, c.grpc, loop, "loop")
	if !strings.Contains(s.PauseMessage, `lookup({"q":"same"})`) || !strings.Contains(s.PauseMessage, "made 3 times") {
		t.Fatalf("loop pause message %q", s.PauseMessage)
	}
	time.Sleep(500 * time.Millisecond)
	if n := ledgerCalls(t, ledger, loop, "lookup"); n != 3 {
		t.Fatalf("the looping call ran %d times; want 3, the loop limit", n)
	}
}
