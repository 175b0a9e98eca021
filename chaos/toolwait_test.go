//go:build e2e

package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A cluster started without --tool-wait keeps a queued tool Step whose
// Workers all went: it waits, says why (GetSession and dexctl session show),
// uses no attempt meanwhile, and runs when a Worker of its tool comes.
func TestToolWait_ByDefaultAQueuedStepOfAGoneToolWaitsForItsWorker(t *testing.T) {
	// The TTL outlives a first attempt that the leader hands to the killed
	// Worker's last poll (it expires after the 3 s heartbeat timeout): the
	// model must call lookup while its Worker is still registered.
	e := newEnv(t, "--worker-ttl", "8s")
	w := e.startWorker("")
	e.waitRegistered(w)
	e.runWorker(client.WorkerOptions{ID: "model", Model: client.ModelFuncs{Run: callsOnce}})

	w.Kill()
	id := e.createSession("call lookup")
	why := `no live Worker serves tool "lookup"`
	waits := func(r *dexv1.GetSessionResponse) bool {
		st := stepsBy(r, kCallTool, "lookup")
		return len(st) == 1 && st[0].Status == dexv1.StepStatus_STEP_STATUS_QUEUED && strings.Contains(st[0].WaitingReason, why)
	}
	r := e.waitFor(id, 60*time.Second, "lookup queued, waiting for a Worker", waits)
	before := len(stepsBy(r, kCallTool, "lookup")[0].Attempts)

	// Long after its Worker was deregistered it still waits, and says so.
	time.Sleep(5 * time.Second)
	if r = e.get(id); !waits(r) || r.Session.Status != dexv1.SessionStatus_SESSION_STATUS_RUNNING {
		t.Fatalf("lookup no longer waits (session %s):\n%s", r.Session.Status, describe(r.Steps))
	}
	if n := len(stepsBy(r, kCallTool, "lookup")[0].Attempts); n != before {
		t.Fatalf("lookup used attempts while it waited: %d, then %d", before, n)
	}
	var shown struct {
		Steps []struct {
			Tool          string `json:"tool"`
			WaitingReason string `json:"waiting_reason"`
		} `json:"steps"`
	}
	e.dexctl(&shown, "session", "show", id, "--json")
	found := false
	for _, st := range shown.Steps {
		found = found || st.Tool == "lookup" && strings.Contains(st.WaitingReason, why)
	}
	if !found {
		t.Fatalf("dexctl session show does not say why lookup waits: %+v", shown.Steps)
	}

	// A Worker of lookup comes: the Step runs there, and the turn ends.
	e.runWorker(client.WorkerOptions{ID: "lookups", Tools: []client.Tool{{
		Spec: &dexv1.ToolSpec{Name: "lookup", Access: dexv1.ToolAccess_TOOL_ACCESS_READ},
		Run: func(context.Context, client.ToolCall) (client.ToolResult, error) {
			return client.ToolResult{Content: "found"}, nil
		},
	}}})
	r = e.waitStatus(id, sIdle, 30*time.Second)
	st := stepsBy(r, kCallTool, "lookup")[0]
	if st.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED || len(st.Attempts) != before+1 || st.Attempts[before].WorkerId != "lookups" {
		t.Fatalf("lookup did not run once on the Worker that came:\n%s", describe(r.Steps))
	}
}
