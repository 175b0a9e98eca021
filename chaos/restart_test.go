//go:build e2e

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A full restart retries an errored parent's kept turn once, even when its
// errored child's retry fails at once (its model input is over its limit)
// and the child's error message reaches the parent inside the same recovery.
//
// With --max-payload 64 KiB a session's model input is at most 32 KiB. The
// child calls lookup with 20 KB of arguments, whose result echoes them: its
// tool-result turn is over the limit and fails at once, keeping the turn.
// The parent answers the child's error by calling lookup too, and its
// tool-result turn is rejected while the file rejecting exists: errored with
// a kept turn and no automatic resume. The full restart retries the child
// first (it errored first), which fails again and tells the parent. The
// parent's answer takes 3 s, so its RunModel Steps are counted before any
// output of the restarted turn comes back.
func TestRestart_AParentsKeptTurnRunsOnceWhenItsChildFailsAtOnce(t *testing.T) {
	e := newEnv(t, "--max-payload", fmt.Sprint(64<<10))
	rejecting := filepath.Join(e.dir, "rejecting")
	touch(t, rejecting)
	e.startWorker(fmt.Sprintf(`{"turns": [
 {"match": "child", "outputs": [{"tool_calls": [{"tool": "lookup", "arguments": {"q": %q}}]}]},
 {"match": "<child-error", "prefix": true, "outputs": [
   {"tool_calls": [{"tool": "lookup", "arguments": {"q": "why"}}]},
   {"error": {"type": "invalid_request", "message": "the provider rejects this request"}, "always": true, "while_file": %q},
   {"text": "noted the error", "delay_ms": 3000}]}
], "default": [{"text": "noted"}]}`, strings.Repeat("a", 20000), rejecting))

	parent := e.createSession("parent")
	e.waitStatus(parent, sIdle, 20*time.Second)
	child := e.createChild(parent, "child")
	e.waitFor(child, 30*time.Second, "over its limit, errored with its turn kept", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sErrored && r.Session.Turn != nil && r.Session.LastErrorType == dexv1.ErrorType_ERROR_TYPE_CONTEXT_LENGTH
	})
	r := e.waitFor(parent, 30*time.Second, "rejected, errored with its turn kept", rejected(1, sErrored))
	if r.Session.Turn == nil {
		t.Fatal("the parent's turn was not kept")
	}
	kept := r.Session.Turn.Number
	before := e.modelCalls(parent)

	e.cluster.KillAll()
	if err := os.Remove(rejecting); err != nil { // the provider takes the request when the cluster is back
		t.Fatal(err)
	}
	if err := e.cluster.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitReady()
	// The child's retry and the parent's come from the one recovery command.
	e.waitFor(child, 30*time.Second, "retried by the restart, failed again", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.RejectedTurns >= 2
	})
	models := 0
	for _, st := range e.get(parent).Steps {
		if st.Kind == dexv1.StepKind_STEP_KIND_RUN_MODEL && st.Turn == kept {
			models++
		}
	}
	if models != 3 { // the lookup call, the rejection, the one retry
		t.Fatalf("the parent's kept turn %d has %d RunModel Steps; want 3", kept, models)
	}

	// The parent answers its kept turn once, then the child's second error.
	r = e.waitFor(parent, 30*time.Second, "the parent idle with an empty inbox", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && len(r.Session.Inbox) == 0
	})
	if n := e.modelCalls(parent) - before; n != 3 {
		t.Fatalf("the parent made %d model calls after the restart; want 3 (the retry, then lookup and an answer for the next message)", n)
	}
	outputs := 0
	for _, h := range r.Session.History {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_ASSISTANT && h.Text == "noted the error" {
			outputs++
		}
	}
	if outputs != 2 {
		t.Fatalf("the parent's history has %d answers to its children's errors; want 2", outputs)
	}
	if errs, _ := e.fromChild(parent, child); errs != 2 {
		t.Fatalf("the parent got %d error messages from its child; want 2", errs)
	}
}
