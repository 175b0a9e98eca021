package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestSessionShowAndListNameTheAgentAndWhyAStepWaits(t *testing.T) {
	s := &dexv1.Session{Id: "s", Agent: "bot@2", Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING}
	steps := []*dexv1.Step{{Id: "s-s1", Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Status: dexv1.StepStatus_STEP_STATUS_QUEUED,
		WaitingReason: `no live Worker serves agent "bot@2" (its model)`}}
	var out bytes.Buffer
	printSession(&out, toSessionJSON(s, steps), 1)
	for _, want := range []string{"agent bot@2", `s-s1 waits: no live Worker serves agent "bot@2"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("session show lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	rows := sessionRows([]*dexv1.SessionSummary{{Id: "s", Agent: "bot@2"}, {Id: "d"}}, "", 0, false)
	printSessionRows(&out, rows, 1, time.Now())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	agentCol := slices.Index(strings.Fields(lines[0]), "AGENT")
	if agentCol < 0 || !strings.Contains(out.String(), "bot@2") {
		t.Fatalf("session list:\n%s", out.String())
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); f[0] == "d" && f[agentCol] != "-" {
			t.Fatalf("the default agent's session shows agent %q; want -", f[agentCol])
		}
	}
}

// session show says which turns were folded; --json lists them.
func TestSessionShowNamesTheFoldedTurns(t *testing.T) {
	s := &dexv1.Session{Id: "s", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, FoldedThroughTurn: 2}
	folded := []*dexv1.FoldedTurn{
		{Turn: 1, Steps: 3, Attempts: 4, LastOutcome: dexv1.Outcome_OUTCOME_SUCCEEDED},
		{Turn: 2, Steps: 2, Attempts: 2, FailedSteps: 1, LastOutcome: dexv1.Outcome_OUTCOME_FAILED},
	}
	sj := toSessionJSON(s, nil).withFolded(folded)
	var out bytes.Buffer
	printSession(&out, sj, 1)
	if !strings.Contains(out.String(), "folded: the Steps of turns 1-2 (5 Steps in 2 turns") {
		t.Fatalf("session show:\n%s", out.String())
	}
	if len(sj.Folded) != 2 || sj.Folded[1].Outcome != "failed" || sj.Folded[1].Failed != 1 || sj.Folded[0].Attempts != 4 {
		t.Fatalf("folded turns as JSON: %+v", sj.Folded)
	}
	out.Reset()
	printSession(&out, toSessionJSON(s, nil), 1)
	if strings.Contains(out.String(), "folded") {
		t.Fatalf("a session without folded turns:\n%s", out.String())
	}
}
