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
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Run timeouts with real processes: handlers that hang while their Worker
// keeps heartbeating are cancelled at their run deadline and their calls end
// by their policies.

const hangScript = `{"turns": [
 {"match": "hang", "outputs": [
   {"tool_calls": [
     {"tool": "lookup", "arguments": {"sleep_ms": 600000}},
     {"tool": "save_note", "arguments": {"sleep_ms": 600000}},
     {"tool": "send_email", "arguments": {"sleep_ms": 600000}}]},
   {"text": "gave up"}]},
 {"match": "slow model", "outputs": [
   {"text": "too late", "delay_ms": 600000, "always": true}]}
]}`

// startWorkerWith starts a dexworker with extra flags.
func (e *env) startWorkerWith(script string, args ...string) *harness.Worker {
	e.t.Helper()
	o := harness.WorkerOptions{BinDir: binDir, Dir: e.dir, Name: fmt.Sprintf("w%d", len(e.workers)+1), Target: e.cluster.Target(),
		Ledger: e.ledger, Script: filepath.Join(e.dir, "script.json"), Args: args}
	if err := os.WriteFile(o.Script, []byte(script), 0o644); err != nil {
		e.t.Fatal(err)
	}
	w := harness.NewWorker(o)
	e.workers = append(e.workers, w)
	if err := w.Start(); err != nil {
		e.t.Fatal(err)
	}
	return w
}

func TestRunTimeout_HungHandlersThatHeartbeatAreCancelledAndEndByTheirPolicies(t *testing.T) {
	// Heartbeats time out after 3 s (fastArgs); the tools may run 4 s, the
	// model 5 s (the cluster's default): only the run timeout can end them.
	e := newEnv(t, "--run-timeout", "5s")
	w := e.startWorkerWith(hangScript, "--tool-run-timeout", "lookup=4s,save_note=4s,send_email=4s")

	hang := e.createSession("hang")
	slow := e.createSession("slow model")
	r := e.waitStatus(hang, sIdle, 90*time.Second)

	want := []struct {
		tool     string
		kind     dexv1.StepKind
		attempts int
		outcome  dexv1.Outcome
	}{
		{"lookup", kCallTool, 3, dexv1.Outcome_OUTCOME_FAILED},
		{"save_note", kCallTool, 3, dexv1.Outcome_OUTCOME_UNKNOWN},
		{"send_email", kSingle, 1, dexv1.Outcome_OUTCOME_UNKNOWN},
	}
	ledger := e.ledgerEntries()
	for _, c := range want {
		st, err := oneStep(r, c.kind, c.tool)
		if err != nil {
			t.Fatal(err)
		}
		if st.Outcome != c.outcome || len(st.Attempts) != c.attempts || !strings.Contains(st.Result, "ran past its run timeout of 4s") {
			t.Fatalf("%s: %s after %d attempts, %q; want %s after %d run timeouts", c.tool, fsm.OutcomeName(fsmpb.Outcome(st.Outcome)),
				len(st.Attempts), st.Result, fsm.OutcomeName(fsmpb.Outcome(c.outcome)), c.attempts)
		}
		for _, a := range st.Attempts {
			ran := time.Duration(a.EndedAtMs-a.StartedAtMs) * time.Millisecond
			if a.Status != dexv1.AttemptStatus_ATTEMPT_STATUS_FAILED || a.ErrorType != dexv1.ErrorType_ERROR_TYPE_TIMEOUT || ran < 4*time.Second {
				t.Fatalf("%s attempt %d: %s, error type %s, ran %s; want failed with timeout after 4s (it heartbeated past the 3s heartbeat timeout)",
					c.tool, a.N, a.Status, fsm.ErrorTypeName(fsmpb.ErrorType(a.ErrorType)), ran)
			}
		}
		if n := harness.Executions(ledger, hang, func(l harness.LedgerEntry) bool { return l.Tool == c.tool }); n != c.attempts {
			t.Fatalf("%s ran %d times; want %d", c.tool, n, c.attempts)
		}
	}

	// The model call past the cluster's default run timeout: three timeouts,
	// a retryable failure (the session errors and resumes later).
	s := e.waitFor(slow, 90*time.Second, "three model timeouts", func(r *dexv1.GetSessionResponse) bool {
		m := stepsBy(r, kRunModel, "")
		return len(m) > 0 && m[0].Status == dexv1.StepStatus_STEP_STATUS_DONE
	})
	model := stepsBy(s, kRunModel, "")[0]
	if len(model.Attempts) != fsm.ModelMaxAttempts || model.ErrorType != dexv1.ErrorType_ERROR_TYPE_TIMEOUT ||
		!strings.Contains(model.Result, "ran past its run timeout of 5s") {
		t.Fatalf("slow model: %d attempts, error type %s, result %q", len(model.Attempts), fsm.ErrorTypeName(fsmpb.ErrorType(model.ErrorType)), model.Result)
	}
	if st := s.Session.Status; st != dexv1.SessionStatus_SESSION_STATUS_ERRORED && st != dexv1.SessionStatus_SESSION_STATUS_RUNNING {
		t.Fatalf("slow model session is %s; want errored (or running again after its resume)", fsm.StatusName(fsmpb.SessionStatus(st)))
	}

	if !w.Running() {
		t.Fatal("the Worker died")
	}
	if log := w.Log(); !strings.Contains(log, "attempt cancelled by the cluster") || !strings.Contains(log, "run timeout") {
		t.Fatalf("the Worker never logged a cancel for a run timeout:\n%s", harness.Tail(log, 10))
	}
}
