//go:build e2e

package chaos

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

const workerLinkScript = `{"turns": [
 {"match": "cut", "prefix": true, "outputs": [
   {"tool_calls": [{"tool": "save_note", "arguments": {"n": 1, "sleep_ms": 2000}}]},
   {"text": "done"}]}
]}`

// A Worker's connections are cut while its tool runs, for longer than the
// Worker heartbeat timeout, without killing the process. Healed, the
// Worker reconnects: the turn ends with the call succeeded, run at most
// its attempts (an idempotent write may be retried by the policy).
func TestWorkerLink_CutWorkerFinishesOrIsRetried(t *testing.T) {
	e, _ := newNetEnv(t, "")
	link, err := harness.NewWorkerLink(e.cluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	o := harness.WorkerOptions{BinDir: binDir, Dir: e.dir, Name: "w1", Target: link.Target(), Ledger: e.ledger, TLS: e.cluster.TLS()}
	o.Script = filepath.Join(e.dir, "script.json")
	if err := os.WriteFile(o.Script, []byte(workerLinkScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if o.Token, err = e.cluster.WorkerToken(e.ctx(30*time.Second), o.Name); err != nil {
		t.Fatal(err)
	}
	w := harness.NewWorker(o)
	e.workers = append(e.workers, w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}

	id := e.createSession("cut the worker")
	waitUntil(t, 60*time.Second, "the tool call to start", func() bool {
		return harness.Executions(e.ledgerEntries(), id, func(l harness.LedgerEntry) bool { return l.Kind == "tool" }) > 0
	})
	link.Cut()
	t.Log("cut the Worker's connections while its tool runs")
	time.Sleep(6 * time.Second) // past the 3 s Worker heartbeat timeout of fastArgs
	if !w.Running() {
		t.Fatal("the Worker exited while cut")
	}
	link.Heal()

	r := e.waitStatus(id, sIdle, 90*time.Second)
	steps := stepsBy(r, kCallTool, "save_note")
	if len(steps) != 1 || steps[0].Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
		t.Fatalf("want one save_note Step that succeeded:\n%s", describe(r.Steps))
	}
	runs := toolCalls(e.ledgerEntries(), id)[steps[0].CallId]
	if runs < 1 || runs > len(steps[0].Attempts) {
		t.Fatalf("save_note ran %d times over %d attempts", runs, len(steps[0].Attempts))
	}
	t.Logf("save_note ran %d time(s) over %d attempt(s)", runs, len(steps[0].Attempts))
}
