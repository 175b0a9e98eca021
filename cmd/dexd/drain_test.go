//go:build e2e

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// drainScript makes the Worker's model call one tool, then answer.
func drainScript(t *testing.T, dir, message, tool string) string {
	t.Helper()
	script := map[string]any{"turns": []any{map[string]any{
		"match": message,
		"outputs": []any{
			map[string]any{"tool_calls": []any{map[string]any{"tool": tool, "call_id": "call-drain", "arguments": map[string]any{"to": "ops"}}}},
			map[string]any{"text": "Done."},
		},
	}}}
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startWorker runs dexworker on the readiness-following target of c, held
// once right before a tool runs, and kills it by PID at cleanup.
func startWorker(t *testing.T, c *testCluster, dir, script string) (ledger string) {
	t.Helper()
	ledger = filepath.Join(dir, "ledger.jsonl")
	runDexworker(t, c, dir, "--ledger", ledger, "--script", script, "--hold", "tool-running", "--poll-wait", "2s")
	return ledger
}

// runDexworker runs dexworker with args on the readiness-following target
// of c, its log in dir/dexworker.log (shown when the test fails), and
// kills it by PID at cleanup.
func runDexworker(t *testing.T, c *testCluster, dir string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, "dexworker.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dexworkerBin, append([]string{"--addr", "dex:///" + strings.Join(c.grpc, ",")}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "dexworker.log"))
			t.Logf("dexworker:\n%s", b)
		}
	})
}

func dexctl(t *testing.T, addrs []string, args ...string) ([]byte, error) {
	t.Helper()
	return exec.Command(dexctlBin, append([]string{"--addr", strings.Join(addrs, ",")}, args...)...).Output()
}

type shownSession struct {
	Status    string `json:"status"`
	LastError string `json:"last_error"`
	Steps     []struct {
		ID       string `json:"id"`
		Kind     string `json:"kind"`
		Status   string `json:"status"`
		Tool     string `json:"tool"`
		CallID   string `json:"call_id"`
		Outcome  string `json:"outcome"`
		Attempts []struct {
			N      uint32 `json:"n"`
			Status string `json:"status"`
			Epoch  uint64 `json:"epoch"`
		} `json:"attempts"`
	} `json:"steps"`
}

func showSession(t *testing.T, addrs []string, id string) (*shownSession, error) {
	out, err := dexctl(t, addrs, "session", "show", id, "--json")
	if err != nil {
		return nil, err
	}
	var s shownSession
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return &s, nil
}

// waitUntil polls cond every 100 ms for up to within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %s within %s; last: %s", what, within, last)
}

// heldStep waits for the Worker to hold inside a tool and returns the Step.
func heldStep(t *testing.T, ledger string) string {
	t.Helper()
	var step string
	waitUntil(t, 30*time.Second, "hold inside the tool", func() (bool, string) {
		b, err := os.ReadFile(ledger + ".held")
		if err != nil {
			return false, err.Error()
		}
		for _, f := range strings.Fields(string(b)) {
			if v, ok := strings.CutPrefix(f, "step="); ok {
				step = v
			}
		}
		return strings.HasPrefix(string(b), "tool-running ") && step != "", string(b)
	})
	return step
}

// executions counts the ledger lines of a Step.
func executions(t *testing.T, ledger, step string) int {
	t.Helper()
	return ledgerCount(t, ledger, func(e ledgerLine) bool { return e.Step == step })
}

// ledgerLine is what the tests read of a line of dexworker's ledger.
type ledgerLine struct {
	Session string `json:"session"`
	Step    string `json:"step"`
	Tool    string `json:"tool"`
}

// ledgerCount counts the ledger's lines that match.
func ledgerCount(t *testing.T, ledger string, match func(ledgerLine) bool) int {
	t.Helper()
	f, err := os.Open(ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e ledgerLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		if match(e) {
			n++
		}
	}
	return n
}

func readyz(addr string) (int, string) { return readyPath(addr, "/readyz") }

// readyPath is the status code and body of GET path on a node's HTTP
// address (0 and the error when it does not answer).
func readyPath(httpAddr, path string) (int, string) {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + httpAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// drainSetup starts a 3-node cluster with extra flags and a held Worker,
// starts a session whose turn calls tool, and waits until the Worker holds
// inside it. It returns the leader's index, the session and the held Step.
func drainSetup(t *testing.T, tool string, extra ...string) (c *testCluster, leader int, session, step, ledger string) {
	t.Helper()
	dir := t.TempDir()
	c = newTestCluster(t)
	c.extra = extra
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	ledger = startWorker(t, c, dir, drainScript(t, dir, "drain demo", tool))

	out, err := dexctl(t, c.grpc, "session", "start", "--message", "drain demo", "--json")
	if err != nil {
		t.Fatalf("session start: %v", err)
	}
	var started struct{ ID string }
	if err := json.Unmarshal(out, &started); err != nil || started.ID == "" {
		t.Fatalf("session start printed %q: %v", out, err)
	}
	session = started.ID
	step = heldStep(t, ledger)

	// The node that runs the held attempt leads now.
	s := waitHealthy(t, c, 15*time.Second)
	leader = -1
	for i := range c.procs {
		if fmt.Sprintf("n%d", i+1) == s.Leader {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("leader %q is not a node of the cluster", s.Leader)
	}
	return c, leader, session, step, ledger
}

// writeScript writes a dexworker script into dir and returns its path.
func writeScript(t *testing.T, dir string, script any) string {
	t.Helper()
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// leaderIndex is the index and id of the node that leads now.
func (c *testCluster) leaderIndex(t *testing.T) (int, string) {
	t.Helper()
	s, err := dexctlStatus(c.grpc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.procs {
		if s.Leader == fmt.Sprintf("n%d", i+1) {
			return i, s.Leader
		}
	}
	t.Fatalf("no leader in %+v", s)
	return -1, ""
}

// others are the gRPC addresses of every node but i.
func (c *testCluster) others(i int) []string {
	var out []string
	for j, a := range c.grpc {
		if j != i {
			out = append(out, a)
		}
	}
	return out
}

// waitNewLeader waits until one of the remaining nodes leads.
func waitNewLeader(t *testing.T, c *testCluster, old int) {
	t.Helper()
	waitUntil(t, 15*time.Second, "a new leader", func() (bool, string) {
		s, err := dexctlStatus(c.others(old))
		if err != nil {
			return false, err.Error()
		}
		return s.Leader != "" && s.Leader != fmt.Sprintf("n%d", old+1), "leader " + s.Leader
	})
}

// checkOneSuccess asserts the session went idle and the held Step ran once:
// one attempt, succeeded, and one ledger line.
func checkOneSuccess(t *testing.T, c *testCluster, old int, session, step, ledger string) {
	t.Helper()
	var last *shownSession
	waitUntil(t, 30*time.Second, "idle session", func() (bool, string) {
		s, err := showSession(t, c.others(old), session)
		if err != nil {
			return false, err.Error()
		}
		last = s
		return s.Status == "idle", s.Status + " " + s.LastError
	})
	found := false
	for _, st := range last.Steps {
		if st.ID != step {
			continue
		}
		found = true
		if len(st.Attempts) != 1 || st.Attempts[0].Status != "succeeded" || st.Outcome != "succeeded" {
			t.Fatalf("held step %s: outcome %q, attempts %+v; want one attempt that succeeded", step, st.Outcome, st.Attempts)
		}
	}
	if !found {
		t.Fatalf("held step %s is not in the session: %+v", step, last.Steps)
	}
	if n := executions(t, ledger, step); n != 1 {
		t.Fatalf("ledger shows %d executions of the held step; want 1", n)
	}
}

func waitExit(t *testing.T, p *proc, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("dexd still running %s after SIGTERM", within)
	}
	return p.cmd.ProcessState.ExitCode()
}

// SIGTERM on the leader while a Worker is inside a tool: the leader stops
// handing out work (/readyz 503 "draining") but keeps leading until the
// attempt completes on it, then hands leadership over and exits 0. The
// attempt is not failed and the tool ran once.
func TestDrainLetsRunningAttemptFinish(t *testing.T) {
	c, leader, session, step, ledger := drainSetup(t, "save_note", "--drain-timeout", "30s")
	lp := c.procs[leader]
	if err := lp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "/readyz draining on the leader", func() (bool, string) {
		code, body := readyz(c.http[leader])
		return code == http.StatusServiceUnavailable && strings.HasPrefix(body, "draining"), fmt.Sprintf("%d %s", code, body)
	})
	// It waits for the held attempt: still up, still the leader.
	time.Sleep(time.Second)
	select {
	case <-lp.done:
		t.Fatalf("the leader exited while an attempt still ran on it; stderr:\n%s", lp.stderr.String())
	default:
	}
	if s, err := dexctlStatus(c.grpc); err != nil || s.Leader != fmt.Sprintf("n%d", leader+1) {
		t.Fatalf("status while draining: %+v, %v; want n%d still leading", s, err, leader+1)
	}

	if err := os.WriteFile(ledger+".release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, lp, 40*time.Second); code != 0 {
		t.Fatalf("drained leader exited %d; stderr:\n%s", code, lp.stderr.String())
	}
	logs := lp.stderr.String()
	if os.Getenv("DEX_TEST_LOG") != "" {
		t.Log(logs)
	}
	if !strings.Contains(logs, "drained: no attempt is running") {
		t.Fatalf("the leader did not see the attempt end while it led; stderr:\n%s", logs)
	}
	if !strings.Contains(logs, "leadership handed over") {
		t.Fatalf("the leader did not hand leadership over; stderr:\n%s", logs)
	}
	waitNewLeader(t, c, leader)
	checkOneSuccess(t, c, leader, session, step, ledger)
}

// An attempt still running when --drain-timeout passes is not failed by the
// draining leader: it exits 0, the next leader re-arms the attempt, and the
// Worker completes it there once released.
func TestDrainTimeoutLeavesAttemptToNextLeader(t *testing.T) {
	c, leader, session, step, ledger := drainSetup(t, "send_email", "--drain-timeout", "2s")
	lp := c.procs[leader]
	if err := lp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, lp, 20*time.Second); code != 0 {
		t.Fatalf("leader exited %d; stderr:\n%s", code, lp.stderr.String())
	}
	logs := lp.stderr.String()
	if os.Getenv("DEX_TEST_LOG") != "" {
		t.Log(logs)
	}
	if !strings.Contains(logs, "drain timeout passed") || strings.Contains(logs, "attempt expired") {
		t.Fatalf("want a drain timeout and no expiry on the old leader; stderr:\n%s", logs)
	}
	waitNewLeader(t, c, leader)
	s, err := showSession(t, c.others(leader), session)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range s.Steps {
		if st.ID == step && (len(st.Attempts) != 1 || st.Attempts[0].Status != "running") {
			t.Fatalf("held step after the handover: %+v; want its one attempt still running", st)
		}
	}

	if err := os.WriteFile(ledger+".release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	checkOneSuccess(t, c, leader, session, step, ledger)
}

// A follower on SIGTERM has nothing to drain: it stops at once, exits 0, and
// the leader stays.
func TestFollowerStopsCleanly(t *testing.T) {
	c := newTestCluster(t)
	c.extra = []string{"--drain-timeout", "30s"}
	c.startAll(t)
	before := waitHealthy(t, c, 15*time.Second)
	follower := 0
	if before.Leader == "n1" {
		follower = 1
	}
	fp := c.procs[follower]
	if err := fp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, fp, 15*time.Second); code != 0 {
		t.Fatalf("follower exited %d; stderr:\n%s", code, fp.stderr.String())
	}
	if logs := fp.stderr.String(); strings.Contains(logs, "draining before handing leadership over") {
		t.Fatalf("a follower drained; stderr:\n%s", logs)
	}
	s, err := dexctlStatus(c.others(follower))
	if err != nil || s.Leader != before.Leader {
		t.Fatalf("status after the follower stopped: %+v, %v; want %s still leading", s, err, before.Leader)
	}
}
