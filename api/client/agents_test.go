package client

import (
	"context"
	"slices"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestWorkerRegistersItsAgentsAndEachToolsAgents(t *testing.T) {
	f := newFakeWorkers()
	nodes := startWorkerNodes(t, f, 1)
	tool := writeTool("search", func(ctx context.Context, c ToolCall) (ToolResult, error) { return ToolResult{}, nil })
	tool.Spec.Agents = []string{"bot@2"}
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{tool}, Model: ModelFuncs{}, Agents: []string{"bot@1", "bot@2"}})
	f.waitFor(t, "the registration", func() bool { return f.lastRegister != nil })
	f.mu.Lock()
	req := f.lastRegister
	f.mu.Unlock()
	if !slices.Equal(req.Agents, []string{"bot@1", "bot@2"}) || !slices.Equal(req.Tools[0].Agents, []string{"bot@2"}) {
		t.Fatalf("registered agents %v, search for %v", req.Agents, req.Tools[0].Agents)
	}
}

func TestWorkerRefusesBadAgents(t *testing.T) {
	tool := func(agents ...string) Tool {
		tl := writeTool("t", func(context.Context, ToolCall) (ToolResult, error) { return ToolResult{}, nil })
		tl.Spec = &dexv1.ToolSpec{Name: "t", Access: dexv1.ToolAccess_TOOL_ACCESS_READ, Agents: agents}
		return tl
	}
	for name, opts := range map[string]WorkerOptions{
		"bad name":       {Model: ModelFuncs{}, Agents: []string{"bot/1"}},
		"empty name":     {Model: ModelFuncs{}, Agents: []string{""}},
		"twice":          {Model: ModelFuncs{}, Agents: []string{"a", "a"}},
		"without model":  {Tools: []Tool{tool()}, Agents: []string{"a"}},
		"tool bad agent": {Tools: []Tool{tool("x y")}},
	} {
		if _, err := NewWorker(nil, opts); err == nil || !strings.Contains(err.Error(), "agent") {
			t.Errorf("%s: error %v; want a refusal about agents", name, err)
		}
	}
}
