package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dexhq/dex/chaos/harness"
)

func TestMatrix_WorkerLanguageAdapter(t *testing.T) {
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--adapter", "ai-sdk"}, "--adapter ai-sdk needs --worker typescript: the go demo Worker has no framework adapters"},
		{[]string{"--worker", "python", "--adapter", "openai-agents"}, "the python demo Worker has no framework adapters"},
		{[]string{"--worker", "typescript", "--adapter", "langchain"}, `unknown adapter "langchain" (known: ai-sdk, openai-agents, claude-agent-sdk)`},
	}
	for _, b := range bad {
		var out, errb bytes.Buffer
		args := append([]string{"matrix", "--out", t.TempDir()}, b.args...)
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), b.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", b.args, code, errb.String(), b.want)
		}
	}
	c, err := parseFlags([]string{"matrix", "--out", "x", "--worker", "typescript", "--adapter", "claude-agent-sdk"}, &bytes.Buffer{})
	if err != nil || c.adapter != "claude-agent-sdk" {
		t.Fatalf("a good adapter: %+v, %v", c, err)
	}
	w := harness.NewWorker(harness.WorkerOptions{Name: "w1", Target: "t", Ledger: "l", Lang: "typescript", Adapter: "ai-sdk"})
	if got := strings.Join(w.Args, " "); !strings.Contains(got, "--adapter ai-sdk") {
		t.Fatalf("the Worker's flags %q lack --adapter", got)
	}
}
