package main

import (
	"strings"

	"github.com/dexhq/dex/api/client"
)

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// withAgents serves each tool only for agents (none: for every agent).
func withAgents(tools []client.Tool, agents []string) []client.Tool {
	if len(agents) == 0 {
		return tools
	}
	for i := range tools {
		tools[i].Spec.Agents = agents
	}
	return tools
}
