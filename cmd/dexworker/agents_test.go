package main

import (
	"io"
	"slices"
	"testing"
)

func TestAgentFlags(t *testing.T) {
	c, err := parseFlags([]string{"--addr", "a:1", "--ledger", "l", "--agent", "bot@1, bot@2", "--tool-agents", "bot@2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.agents, []string{"bot@1", "bot@2"}) || !slices.Equal(c.toolAgents, []string{"bot@2"}) {
		t.Fatalf("agents %v, tool agents %v", c.agents, c.toolAgents)
	}
	for _, tl := range withAgents((&demoTools{}).tools(), c.toolAgents) {
		if !slices.Equal(tl.Spec.Agents, []string{"bot@2"}) {
			t.Fatalf("tool %s served for %v; want bot@2", tl.Spec.Name, tl.Spec.Agents)
		}
	}
	c, err = parseFlags([]string{"--addr", "a:1", "--ledger", "l"}, io.Discard)
	if err != nil || c.agents != nil || len(withAgents((&demoTools{}).tools(), nil)[0].Spec.Agents) != 0 {
		t.Fatalf("without --agent: %v, %v; want the default agent and tools for every agent", c, err)
	}
}
