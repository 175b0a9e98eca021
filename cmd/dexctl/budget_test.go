package main

import (
	"strings"
	"testing"
)

func TestSessionBudget(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "budget", "s1", "max_tokens=5000")
	if err != nil || out != "s1 budget: max_tokens=5000 max_turns=4 loop_limit=3\n" {
		t.Fatalf("budget: %q %v", out, err)
	}
	if len(f.budgets) != 1 || f.budgets[0].Change.GetMaxTokens() != 5000 || f.budgets[0].Change.MaxTurns != nil {
		t.Fatalf("requests %v", f.budgets)
	}
	if out, err := run(t, "--addr", addr, "session", "budget", "s1", "max_tokens=1", "--json"); err != nil || !strings.Contains(out, `"max_tokens": 1`) {
		t.Fatalf("budget --json: %q %v", out, err)
	}
	if _, err := run(t, "--addr", addr, "session", "budget", "nobody", "max_turns=1"); err == nil || !strings.Contains(err.Error(), `session "nobody" not found`) {
		t.Fatalf("budget of an unknown session: %v", err)
	}
	sent := len(f.budgets)
	for _, bad := range []string{"tokens=1", "max_tokens", "max_turns=-2"} {
		if _, err := run(t, "--addr", addr, "session", "budget", "s1", bad); err == nil || !strings.Contains(err.Error(), "budget") {
			t.Errorf("budget %q: %v; want a usage error", bad, err)
		}
	}
	if _, err := run(t, "--addr", addr, "session", "start", "--budget", "max_tokens=x"); err == nil || !strings.Contains(err.Error(), "--budget") {
		t.Fatalf("start --budget max_tokens=x: %v", err)
	}
	if len(f.budgets) != sent || len(f.created) != 0 {
		t.Fatalf("refused input sent requests: %d budgets, %d creates", len(f.budgets)-sent, len(f.created))
	}
	if _, err := run(t, "--addr", addr, "session", "start", "--id", "b1", "--budget", "max_cost_micros=900,loop_limit=2"); err != nil {
		t.Fatal(err)
	}
	if b := f.created[0].Budget; b.GetMaxCostMicros() != 900 || b.GetLoopLimit() != 2 {
		t.Fatalf("start --budget sent %v", b)
	}
}
