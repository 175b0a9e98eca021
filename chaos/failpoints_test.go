//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

var (
	chaosOnce sync.Once
	chaosDir  string
	chaosErr  error
)

// chaosBinDir holds a chaos build of dexd (failpoints compiled in) beside
// the normal dexworker and dexctl.
func chaosBinDir(t *testing.T) string {
	t.Helper()
	chaosOnce.Do(func() {
		chaosDir = filepath.Join(binDir, "chaos")
		if chaosErr = os.MkdirAll(chaosDir, 0o755); chaosErr != nil {
			return
		}
		if chaosErr = harness.BuildChaos(chaosDir); chaosErr != nil {
			return
		}
		for _, b := range []string{"dexworker", "dexctl"} {
			if chaosErr = os.Symlink(filepath.Join(binDir, b), filepath.Join(chaosDir, b)); chaosErr != nil {
				return
			}
		}
	})
	if chaosErr != nil {
		t.Fatal(chaosErr)
	}
	return chaosDir
}

// newFailpointEnv is newEnv on the binaries of bin, every node started with
// the failpoint terms (and a gofail HTTP endpoint, returned per node) and
// the extra flags args.
func newFailpointEnv(t *testing.T, bin, terms string, size int, args ...string) (*env, map[*harness.Node]string) {
	t.Helper()
	dir := t.TempDir()
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: bin, Dir: dir, Size: size, Args: append(append([]string{}, fastArgs...), args...)})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, cluster: c, ledger: filepath.Join(dir, "ledger.jsonl")}
	t.Cleanup(e.stop)
	fpHTTP := map[*harness.Node]string{}
	for _, n := range c.Nodes {
		addr, err := harness.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		fpHTTP[n] = addr
		if err := harness.SetFailpoints(n, terms, addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitReady()
	conn, err := client.Dial(c.Target())
	if err != nil {
		t.Fatal(err)
	}
	e.conn, e.client = conn, client.New(conn)
	return e, fpHTTP
}

// A chaos-built dexd evaluates GOFAIL_FAILPOINTS: a panic term at
// dexBeforeCommitResult kills the node at the first Complete. The normal
// build ignores the variable and finishes the session.
func TestFailpoints_PanicAtCompleteOnlyInTheChaosBuild(t *testing.T) {
	terms := harness.FailpointBeforeCommitResult + `=panic("chaos test")`
	t.Run("chaos build", func(t *testing.T) {
		e, fp := newFailpointEnv(t, chaosBinDir(t), terms, 1)
		n := e.cluster.Nodes[0]
		list, err := harness.FailpointsOf(fp[n])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(list, harness.FailpointBeforeCommitResult+`=panic("chaos test")`) || !strings.Contains(list, harness.FailpointAfterWaitResolved+"=") {
			t.Fatalf("the node lists its failpoints as %q", list)
		}
		e.startWorker("")
		e.createSession("demo")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Wait(ctx); err == nil || ctx.Err() != nil {
			t.Fatalf("the node did not die at the failpoint: %v", err)
		}
		if !strings.Contains(n.Log(), "failpoint panic: chaos test") {
			t.Fatalf("the node died without the failpoint's panic:\n%s", harness.Tail(n.Log(), 10))
		}
	})
	t.Run("normal build", func(t *testing.T) {
		e, _ := newFailpointEnv(t, binDir, terms, 1)
		e.startWorker("")
		id := e.createSession("demo")
		e.waitStatus(id, sIdle, 20*time.Second)
		if n := e.cluster.Nodes[0]; !n.Running() || strings.Contains(n.Log(), "failpoint") {
			t.Fatalf("the normal build reacted to GOFAIL_FAILPOINTS:\n%s", harness.Tail(n.Log(), 10))
		}
	})
}

// failpointCount is how often a node evaluated a failpoint.
func failpointCount(addr, name string) int {
	resp, err := harness.HTTPClient.Get("http://" + addr + "/" + name + "/count")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var n int
	if _, err := fmt.Fscan(resp.Body, &n); err != nil {
		return -1
	}
	return n
}

// docs/crash-matrix.md, "after the Worker sent its result, before the cluster committed
// it": every node sleeps 3 s in dexBeforeCommitResult; the leader gets
// SIGKILL while the Worker's Complete of the first RunModel sleeps there.
// The result is committed once, or the attempt fails and the RunModel row
// applies (another attempt runs the model again) — never both.
func TestFailpoints_LeaderKilledWhileAResultWaitsToCommit(t *testing.T) {
	e, fp := newFailpointEnv(t, chaosBinDir(t), harness.FailpointBeforeCommitResult+"=sleep(3000)", 3)
	w := e.startWorker("")
	leader := e.leader()
	id := e.createSession("demo")
	deadline := time.Now().Add(20 * time.Second)
	for failpointCount(fp[leader], harness.FailpointBeforeCommitResult) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the leader never reached dexBeforeCommitResult")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The Complete sleeps in the failpoint: nothing of it is committed.
	time.Sleep(300 * time.Millisecond)
	leader.Kill()
	// Once the first RunModel has its outcome, the survivors stop sleeping
	// so the rest of the turn runs at full speed.
	e.waitFor(id, 30*time.Second, "the first RunModel ended", func(r *dexv1.GetSessionResponse) bool {
		m := stepsBy(r, kRunModel, "")
		return len(m) > 0 && m[0].Outcome != dexv1.Outcome_OUTCOME_UNSPECIFIED
	})
	for n, addr := range fp {
		if n != leader {
			if err := harness.SetFailpoint(addr, harness.FailpointBeforeCommitResult, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := e.waitStatus(id, sIdle, 30*time.Second)

	models := stepsBy(r, kRunModel, "")
	if len(models) != 2 {
		t.Fatalf("%d RunModel steps; want 2:\n%s", len(models), describe(r.Steps))
	}
	l := e.ledgerEntries()
	for _, st := range r.Steps {
		succeeded := 0
		for _, a := range st.Attempts {
			if a.Status == dexv1.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED {
				succeeded++
			}
		}
		if succeeded != 1 || st.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
			t.Fatalf("step %s (%s %s): %d succeeded attempts, outcome %s:\n%s", st.Id, st.Kind, st.Tool, succeeded, st.Outcome, describe(r.Steps))
		}
		if last := st.Attempts[len(st.Attempts)-1]; last.Status != dexv1.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED {
			t.Fatalf("step %s: an attempt ran after the one that succeeded:\n%s", st.Id, describe(r.Steps))
		}
		runs := harness.Executions(l, id, func(x harness.LedgerEntry) bool { return x.Step == st.Id })
		if st.Kind == kSingle {
			if runs != 1 || len(st.Attempts) != 1 {
				t.Fatalf("single-attempt step %s: %d attempts, %d runs", st.Id, len(st.Attempts), runs)
			}
			continue
		}
		if runs != len(st.Attempts) {
			t.Fatalf("step %s (%s): %d attempts but %d executions in the ledger", st.Id, st.Tool, len(st.Attempts), runs)
		}
	}
	first := models[0]
	if len(first.Attempts) == 1 {
		t.Logf("the result of the first RunModel was committed once (retried Complete on the new leader); 1 model call")
	} else {
		t.Logf("the first RunModel's attempt 1 failed (%s) and attempt %d ran the model again; %d model calls",
			first.Attempts[0].Progress, len(first.Attempts), len(first.Attempts))
	}
	if !w.Running() {
		t.Fatalf("the Worker died: %s", harness.Tail(w.Log(), 5))
	}
}
