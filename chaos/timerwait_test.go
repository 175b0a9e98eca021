//go:build e2e

package chaos

import (
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

const timerScript = `{"turns": [
 {"match": "nap", "outputs": [{"tool_calls": [{"tool": "sleep", "arguments": {"seconds": 2}}]}, {"text": "slept"}]}
]}`

// docs/crash-matrix.md, "any wait … while the state machine moves the turn
// on", its timer case: the leader's FireTimer commits (which also queues the
// tool-result RunModel), the timer wheel then sleeps in dexAfterWaitResolved,
// and the leader gets SIGKILL there. The new leader has no timer left to
// fire and no move left to make: the timer is recorded once and the turn
// moves on once.
func TestFailpoints_ACrashRightAfterATimerFiredRepeatsNothing(t *testing.T) {
	e, fp := newFailpointEnv(t, chaosBinDir(t), harness.FailpointAfterWaitResolved+"=sleep(10000)", 3)
	w := e.startWorker(timerScript)
	id := e.createSession("nap")

	var fired *harness.Node
	deadline := time.Now().Add(30 * time.Second)
	for fired == nil {
		for n, addr := range fp {
			if failpointCount(addr, harness.FailpointAfterWaitResolved) > 0 {
				fired = n
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no node reached dexAfterWaitResolved after firing the timer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The FireTimer is committed; its node sleeps right after it.
	r := e.get(id)
	timers := stepsBy(r, kTimer, "")
	if len(timers) != 1 || timers[0].Status != stepDone {
		t.Fatalf("the timer is not recorded as fired before the crash:\n%s", describe(r.Steps))
	}
	fired.Kill()

	r = e.waitStatus(id, sIdle, 60*time.Second)
	if models := stepsBy(r, kRunModel, ""); len(models) != 2 {
		t.Fatalf("%d RunModel steps; want the one that slept and one tool-result turn:\n%s", len(models), describe(r.Steps))
	}
	timers = stepsBy(r, kTimer, "")
	if len(timers) != 1 || timers[0].Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED || len(timers[0].Attempts) != 0 {
		t.Fatalf("timer steps:\n%s", describe(r.Steps))
	}
	results, answers := 0, 0
	for _, h := range r.Session.History {
		switch {
		case h.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT && h.CallId == timers[0].CallId:
			results++
			if h.Text != timers[0].Result || !strings.HasPrefix(h.Text, "slept until") {
				t.Fatalf("the timer's result reads %q; its Step says %q", h.Text, timers[0].Result)
			}
		case h.Kind == dexv1.HistoryKind_HISTORY_KIND_ASSISTANT && h.Text == "slept":
			answers++
		}
	}
	if results != 1 || answers != 1 {
		t.Fatalf("the timer's result is in the history %d times and the final answer %d times; want once each", results, answers)
	}
	if !w.Running() {
		t.Fatalf("the Worker died: %s", harness.Tail(w.Log(), 5))
	}
}
