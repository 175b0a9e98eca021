package wirerules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// DefaultLoopLimit is how many times one tool call (name and canonical
// arguments) may be made in a turn before the session pauses, when its
// budget does not say.
const DefaultLoopLimit = 3

// BudgetFields are the names a budget is written with, in
// "max_tokens=100000,loop_limit=5" (ParseBudget) and shown with.
var BudgetFields = []string{"max_tokens", "max_cost_micros", "max_turns", "max_model_calls_per_turn", "max_tool_calls_per_turn", "loop_limit"}

// ParseBudget reads "FIELD=N[,FIELD=N…]" (BudgetFields; 0 is no limit) as
// a change to a budget: the fields named, and only those.
func ParseBudget(text string) (*dexv1.BudgetChange, error) {
	ch := &dexv1.BudgetChange{}
	seen := map[string]bool{}
	for _, part := range strings.Split(text, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("budget %q: want FIELD=N[,FIELD=N…] with FIELD one of %s", text, strings.Join(BudgetFields, ", "))
		}
		if seen[name] {
			return nil, fmt.Errorf("budget %q: %s is given twice", text, name)
		}
		seen[name] = true
		if !slices.Contains(BudgetFields, name) {
			return nil, fmt.Errorf("budget %q: unknown field %q: want one of %s", text, name, strings.Join(BudgetFields, ", "))
		}
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("budget %q: %s=%s is not a whole number of 0 or more", text, name, val)
		}
		small := func() (*uint32, error) {
			if n > 1<<32-1 {
				return nil, fmt.Errorf("budget %q: %s=%d is over %d", text, name, n, uint32(1<<32-1))
			}
			v := uint32(n)
			return &v, nil
		}
		switch name {
		case "max_tokens":
			ch.MaxTokens = &n
		case "max_cost_micros":
			ch.MaxCostMicros = &n
		case "max_turns":
			ch.MaxTurns = &n
		case "max_model_calls_per_turn":
			ch.MaxModelCallsPerTurn, err = small()
		case "max_tool_calls_per_turn":
			ch.MaxToolCallsPerTurn, err = small()
		case "loop_limit":
			ch.LoopLimit, err = small()
		}
		if err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// ApplyBudgetChange returns b with ch's fields over it (b is not changed;
// nil is a budget of no limits).
func ApplyBudgetChange(b *dexv1.Budget, ch *dexv1.BudgetChange) *dexv1.Budget {
	out := &dexv1.Budget{}
	if b != nil {
		out.MaxTokens, out.MaxCostMicros, out.MaxTurns = b.MaxTokens, b.MaxCostMicros, b.MaxTurns
		out.MaxModelCallsPerTurn, out.MaxToolCallsPerTurn, out.LoopLimit = b.MaxModelCallsPerTurn, b.MaxToolCallsPerTurn, b.LoopLimit
	}
	if ch == nil {
		return out
	}
	if ch.MaxTokens != nil {
		out.MaxTokens = *ch.MaxTokens
	}
	if ch.MaxCostMicros != nil {
		out.MaxCostMicros = *ch.MaxCostMicros
	}
	if ch.MaxTurns != nil {
		out.MaxTurns = *ch.MaxTurns
	}
	if ch.MaxModelCallsPerTurn != nil {
		out.MaxModelCallsPerTurn = *ch.MaxModelCallsPerTurn
	}
	if ch.MaxToolCallsPerTurn != nil {
		out.MaxToolCallsPerTurn = *ch.MaxToolCallsPerTurn
	}
	if ch.LoopLimit != nil {
		out.LoopLimit = *ch.LoopLimit
	}
	return out
}

// OverBudget is a session's budget at creation: the agent's default with
// the request's non-zero fields over it.
func OverBudget(agentDefault, requested *dexv1.Budget) *dexv1.Budget {
	out := ApplyBudgetChange(agentDefault, nil)
	r := requested
	if r == nil {
		return out
	}
	for _, f := range []struct {
		dst *uint64
		v   uint64
	}{{&out.MaxTokens, r.MaxTokens}, {&out.MaxCostMicros, r.MaxCostMicros}, {&out.MaxTurns, r.MaxTurns}} {
		if f.v != 0 {
			*f.dst = f.v
		}
	}
	for _, f := range []struct {
		dst *uint32
		v   uint32
	}{{&out.MaxModelCallsPerTurn, r.MaxModelCallsPerTurn}, {&out.MaxToolCallsPerTurn, r.MaxToolCallsPerTurn}, {&out.LoopLimit, r.LoopLimit}} {
		if f.v != 0 {
			*f.dst = f.v
		}
	}
	return out
}

// BudgetText is a budget as people read it: each limit set, as
// FIELD=N, then the loop limit in force ("loop_limit=3" when it sets none).
func BudgetText(b *dexv1.Budget) string {
	var parts []string
	for i, v := range []uint64{b.GetMaxTokens(), b.GetMaxCostMicros(), b.GetMaxTurns(),
		uint64(b.GetMaxModelCallsPerTurn()), uint64(b.GetMaxToolCallsPerTurn())} {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", BudgetFields[i], v))
		}
	}
	loop := b.GetLoopLimit()
	if loop == 0 {
		loop = DefaultLoopLimit
	}
	return strings.Join(append(parts, fmt.Sprintf("loop_limit=%d", loop)), " ")
}
