package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestAgentBudgetFlag(t *testing.T) {
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1",
		"--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
	o, err := parse(append(base, "--agent-budget", "support/max_tokens=200000,loop_limit=5", "--agent-budget", "default/max_turns=3"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if b := o.agentBudgets["support"]; b.GetMaxTokens() != 200000 || b.GetLoopLimit() != 5 || b.GetMaxTurns() != 0 {
		t.Fatalf("support's budget %v", b)
	}
	if got := o.agentBudgets.String(); got != "default/max_turns=3,loop_limit=3 support/max_tokens=200000,loop_limit=5" {
		t.Fatalf("shown as %q", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent-budget", "support"}, `"support" is not NAME/FIELD=N`},
		{[]string{"--agent-budget", "/max_tokens=1"}, `is not NAME/FIELD=N`},
		{[]string{"--agent-budget", "bot/tokens=1"}, `agent bot: budget "tokens=1": unknown field "tokens"`},
		{[]string{"--agent-budget", "bot/max_tokens=1", "--agent-budget", "bot/max_turns=1"}, "agent bot is given twice"},
		{[]string{"--agent-budget", "b d/max_tokens=1"}, `agent "b d"`},
	} {
		_, err := parse(append(base, tc.args...), io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}
