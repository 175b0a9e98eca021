package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func workersFixture() *dexv1.ListWorkersResponse {
	return &dexv1.ListWorkersResponse{AnsweredBy: "n1", Leader: true, Workers: []*dexv1.WorkerStatus{
		{Worker: &dexv1.WorkerInfo{Id: "bots", RunsModel: true, Agents: []string{"bot@1", "bot@2"},
			Tools: []*dexv1.ToolSpec{{Name: "search", Agents: []string{"bot@1"}}, {Name: "fetch"}}}, OpenPolls: 1},
		{Worker: &dexv1.WorkerInfo{Id: "plain", RunsModel: true}},
		{Worker: &dexv1.WorkerInfo{Id: "tools", Tools: []*dexv1.ToolSpec{{Name: "fetch"}}}, Health: &dexv1.WorkerHealth{Unhealthy: true}},
	}}
}

func TestWorkersListsEachWorkersAgents(t *testing.T) {
	var out bytes.Buffer
	printWorkers(&out, workersFixture(), time.Now())
	rows := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	for id, want := range map[string][]string{
		"bots":  {"bot@1,bot@2", "search[bot@1],fetch"},
		"plain": {"(default)", "-"},
		"tools": {"-", "fetch"},
	} {
		if got := rows[id]; len(got) < 3 || got[1] != want[0] || got[2] != want[1] {
			t.Errorf("row of %s = %v; want agents %q and tools %q\n%s", id, got, want[0], want[1], out.String())
		}
	}
	if !strings.Contains(out.String(), "unhealthy") {
		t.Errorf("the unhealthy Worker is not marked:\n%s", out.String())
	}

	out.Reset()
	printWorkers(&out, &dexv1.ListWorkersResponse{}, time.Now())
	if !strings.Contains(out.String(), "No Worker is registered") {
		t.Errorf("empty listing says %q", out.String())
	}
}

func TestWorkersJSONNamesAgentsPerWorkerAndTool(t *testing.T) {
	var js bytes.Buffer
	if err := printWorkersJSON(&js, workersFixture()); err != nil {
		t.Fatal(err)
	}
	var got []workerJSON
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d workers in JSON", len(got))
	}
	if a := got[0].Agents; len(a) != 2 || a[0] != "bot@1" || got[0].Tools[0].Agents[0] != "bot@1" || len(got[0].Tools[1].Agents) != 0 {
		t.Errorf("bots: %+v", got[0])
	}
	if a := got[1].Agents; len(a) != 1 || a[0] != "" {
		t.Errorf("plain runs the default agent's model; JSON agents %q", a)
	}
	if len(got[2].Agents) != 0 || got[2].RunsModel || got[2].Healthy {
		t.Errorf("tools: %+v", got[2])
	}
}
