//go:build e2e

package chaos

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// Six calls per session, each running a few seconds: three idempotent
// writes and three single-attempt sends.
const frozenLeaderScript = `{"turns": [
 {"match": "freeze", "prefix": true, "outputs": [
   {"tool_calls": [
     {"tool": "save_note", "arguments": {"n": 1, "sleep_ms": 2000}},
     {"tool": "send_email", "arguments": {"n": 2, "sleep_ms": 3000}},
     {"tool": "save_note", "arguments": {"n": 3, "sleep_ms": 4000}},
     {"tool": "send_email", "arguments": {"n": 4, "sleep_ms": 5000}},
     {"tool": "save_note", "arguments": {"n": 5, "sleep_ms": 6000}},
     {"tool": "send_email", "arguments": {"n": 6, "sleep_ms": 7000}}]},
   {"text": "done"}]}
]}`

// The leader freezes (SIGSTOP) for 20 s while 30 tool calls run, and the
// calls finish during the freeze. Their Workers must reach the new leader
// inside its grace: no call that finished runs again, and none is recorded
// outcome_unknown.
func TestFrozenLeader_FinishedCallsNeitherRunAgainNorTurnUnknown(t *testing.T) {
	const sessions, callsPerSession = 5, 6
	e := newEnv(t)
	w := e.startWorkerWith(frozenLeaderScript, "--concurrency", "32")
	var ids []string
	for i := range sessions {
		ids = append(ids, e.createSession(fmt.Sprintf("freeze %d", i+1)))
	}
	deadline := time.Now().Add(60 * time.Second)
	for toolLines(e.ledgerEntries()) < sessions*callsPerSession {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d tool calls started within 60 s", toolLines(e.ledgerEntries()), sessions*callsPerSession)
		}
		time.Sleep(50 * time.Millisecond)
	}

	leader := e.leader()
	if err := leader.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = leader.Signal(syscall.SIGCONT) })
	time.Sleep(20 * time.Second)
	if err := leader.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s was stopped for %s while every call finished", leader.ID, time.Since(stopped).Round(time.Millisecond))

	ledger := e.ledgerEntries()
	retried := 0
	for _, id := range ids {
		r := e.waitStatus(id, sIdle, 120*time.Second)
		calls := toolCalls(ledger, id)
		steps := append(stepsBy(r, kCallTool, ""), stepsBy(r, kSingle, "")...)
		if len(steps) != callsPerSession {
			t.Fatalf("session %s has %d tool Steps; want %d:\n%s", id, len(steps), callsPerSession, describe(r.Steps))
		}
		for _, st := range steps {
			if st.Outcome == dexv1.Outcome_OUTCOME_UNKNOWN {
				t.Errorf("session %s: %s call %s is outcome_unknown though it finished; attempts:\n%s", id, st.Tool, st.CallId, describe([]*dexv1.Step{st}))
			}
			if st.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
				t.Errorf("session %s: %s call %s ended %s; want succeeded", id, st.Tool, st.CallId, st.Outcome)
			}
			if n := calls[st.CallId]; n != 1 {
				t.Errorf("session %s: %s call %s ran %d times; want 1", id, st.Tool, st.CallId, n)
			}
			if len(st.Attempts) > 1 {
				retried++
			}
		}
	}
	t.Logf("%d calls over %d sessions: each ran once; %d Steps took a second attempt (unclaimed ones may); the Worker %s",
		sessions*callsPerSession, sessions, retried, map[bool]string{true: "survived", false: "died"}[w.Running()])
	if !w.Running() {
		t.Fatal("the Worker died")
	}
}

func toolLines(l []harness.LedgerEntry) int {
	n := 0
	for _, e := range l {
		if e.Kind == "tool" {
			n++
		}
	}
	return n
}
