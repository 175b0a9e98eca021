//go:build e2e

package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

func needHAProxy(t *testing.T) {
	t.Helper()
	if !harness.HAProxyAvailable() {
		t.Skip("haproxy is not installed (.ci/run installs it)")
	}
}

// The shipped file is valid as is (the `make run` ports) and with the
// harness's addresses.
func TestHAProxy_ShippedConfigIsValid(t *testing.T) {
	needHAProxy(t)
	if out, err := exec.Command("haproxy", "-c", "-f", "../deploy/haproxy/haproxy.cfg").CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v: %s", err, out)
	}
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: binDir, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	env, err := harness.HAProxyEnv("127.0.0.1:1", c.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	check := exec.Command("haproxy", "-c", "-f", "../deploy/haproxy/haproxy.cfg")
	check.Env = append(os.Environ(), env...)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c with the harness's addresses: %v: %s", err, out)
	}
	if _, err := harness.HAProxyEnv("127.0.0.1:1", c.Nodes[:2]); err == nil {
		t.Fatal("HAProxyEnv took 2 nodes")
	}
}

// A Worker and a client that know only HAProxy's address: a session goes
// idle, the leader gets SIGKILL, and a second session through the same
// address goes idle on the same Worker process.
func TestHAProxy_WorkersFollowTheLeaderThroughOneAddress(t *testing.T) {
	needHAProxy(t)
	e := newEnv(t)
	h, err := harness.StartHAProxy(harness.HAProxyOptions{Dir: e.dir, Nodes: e.cluster.Nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- haproxy log tail:\n%s", harness.Tail(h.Log(), 20))
		}
		if err := h.Stop(); err != nil {
			t.Errorf("haproxy stop: %v", err)
		}
	})
	w := harness.NewWorker(harness.WorkerOptions{BinDir: binDir, Dir: e.dir, Name: "w-lb", Target: h.Addr, Ledger: e.ledger})
	e.workers = append(e.workers, w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(h.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lb := client.New(conn)

	demo := func(name string) *dexv1.GetSessionResponse {
		t.Helper()
		ctx := e.ctx(30 * time.Second)
		s, err := lb.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: name, Message: "demo"})
		if err != nil {
			t.Fatalf("create %s through haproxy: %v", name, err)
		}
		for {
			r, err := lb.GetSession(ctx, s.Id)
			if err != nil {
				t.Fatalf("get %s through haproxy: %v", name, err)
			}
			if r.Session.Status == sIdle {
				return r
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s is %s after 30 s:\n%s", name, fsm.StatusName(fsmpb.SessionStatus(r.Session.Status)), describe(r.Steps))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	checkDone := func(r *dexv1.GetSessionResponse) {
		t.Helper()
		if n := len(stepsBy(r, kRunModel, "")); n != 2 {
			t.Fatalf("%d RunModel steps:\n%s", n, describe(r.Steps))
		}
		for _, st := range r.Steps {
			if st.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
				t.Fatalf("step %s %s is %s:\n%s", st.Id, st.Tool, fsm.OutcomeName(fsmpb.Outcome(st.Outcome)), describe(r.Steps))
			}
			for _, a := range st.Attempts {
				if a.WorkerId != w.Name {
					t.Fatalf("step %s ran on %s; want %s", st.Id, a.WorkerId, w.Name)
				}
			}
		}
	}
	checkDone(demo("before-takeover"))

	old := e.leader()
	killed := time.Now()
	old.Kill()
	r := demo("after-takeover")
	checkDone(r)
	if next := e.leader(); next == old {
		t.Fatal("the killed node leads")
	}
	first := stepsBy(r, kRunModel, "")[0].Attempts[0]
	t.Logf("through haproxy, the first task after the kill started %d ms after it", first.StartedAtMs-killed.UnixMilli())
	if !w.Running() {
		t.Fatalf("the Worker died: %s", harness.Tail(w.Log(), 5))
	}
	// dexctl through the same address.
	out, err := exec.Command(filepath.Join(binDir, "dexctl"), "--addr", h.Addr, "session", "show", "after-takeover", "--json").Output()
	if err != nil || !strings.Contains(string(out), `"status": "idle"`) && !strings.Contains(string(out), `"status":"idle"`) {
		t.Fatalf("dexctl through haproxy: %v: %s", err, out)
	}
	if !h.Running() {
		t.Fatal("haproxy died")
	}
	if b, err := os.ReadFile(filepath.Join(e.dir, "haproxy.cfg")); err != nil || len(b) == 0 {
		t.Fatalf("the harness's haproxy.cfg: %v", err)
	}
}
