package wirerules

import (
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A budget is written FIELD=N,…: the fields named change, 0 included, and
// a malformed one is refused naming what is wrong.
func TestParseBudget(t *testing.T) {
	ch, err := ParseBudget("max_tokens=1000, loop_limit=5,max_turns=0")
	if err != nil {
		t.Fatal(err)
	}
	b := ApplyBudgetChange(&dexv1.Budget{MaxTurns: 9, MaxCostMicros: 7}, ch)
	if b.MaxTokens != 1000 || b.LoopLimit != 5 || b.MaxTurns != 0 || b.MaxCostMicros != 7 {
		t.Fatalf("budget %v", b)
	}
	for text, want := range map[string]string{
		"":                                "want FIELD=N",
		"max_tokens":                      "want FIELD=N",
		"max_tokens=-1":                   "not a whole number",
		"max_tokens=1,max_tokens=2":       "given twice",
		"tokens=1":                        `unknown field "tokens"`,
		"loop_limit=4294967296":           "is over 4294967295",
		"max_model_calls_per_turn=1e3":    "not a whole number",
		"max_tool_calls_per_turn=3,x=1=2": `unknown field "x"`,
	} {
		if _, err := ParseBudget(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseBudget(%q): %v, want %q", text, err, want)
		}
	}
}

// A session starts with its agent's budget, the request's non-zero fields
// over it.
func TestOverBudget(t *testing.T) {
	b := OverBudget(&dexv1.Budget{MaxTokens: 100, LoopLimit: 4}, &dexv1.Budget{MaxTokens: 50, MaxTurns: 2})
	if b.MaxTokens != 50 || b.MaxTurns != 2 || b.LoopLimit != 4 {
		t.Fatalf("budget %v", b)
	}
	if b := OverBudget(nil, nil); b.MaxTokens != 0 || b.LoopLimit != 0 {
		t.Fatalf("no budgets: %v", b)
	}
}
