package main

import (
	"fmt"
	"sort"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
)

// agentBudgets is --agent-budget NAME/FIELD=N[,FIELD=N…], repeatable: the
// budget a new session of the agent starts with ("default" names the
// default agent; a name holds no "/").
type agentBudgets map[string]*dexv1.Budget

func (a agentBudgets) String() string {
	parts := make([]string, 0, len(a))
	for name, b := range a {
		parts = append(parts, agentLabel(name)+"/"+strings.ReplaceAll(wirerules.BudgetText(b), " ", ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (a agentBudgets) Set(v string) error {
	name, fields, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok || name == "" {
		return fmt.Errorf("%q is not NAME/FIELD=N[,FIELD=N…] (e.g. support-bot/max_tokens=200000,loop_limit=5)", v)
	}
	agent := name
	if name == "default" {
		agent = ""
	} else if r := fsm.CheckAgent(name); r != nil {
		return fmt.Errorf("agent %q: %s", name, r.Reason)
	}
	if _, dup := a[agent]; dup {
		return fmt.Errorf("agent %s is given twice", name)
	}
	ch, err := wirerules.ParseBudget(fields)
	if err != nil {
		return fmt.Errorf("agent %s: %v", name, err)
	}
	a[agent] = wirerules.ApplyBudgetChange(nil, ch)
	return nil
}
