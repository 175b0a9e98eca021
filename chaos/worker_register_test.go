//go:build e2e

package chaos

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// What a person starting the demo Worker sees: why it cannot register, and
// where it registered; and a Worker stopped with SIGTERM leaves the Worker
// list at once.

// waitLogCount waits (bounded) until p's log holds want n times.
func waitLogCount(t *testing.T, p *harness.Proc, want string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for strings.Count(p.Log(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q not seen %d times within %s; log:\n%s", p.Name, want, n, within, harness.Tail(p.Log(), 10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestDemoWorker_SaysWhyItCannotRegisterAndKeepsSayingIt(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	dir := t.TempDir()
	w := harness.NewWorker(harness.WorkerOptions{BinDir: binDir, Dir: dir, Name: "w1", Target: addr, Ledger: filepath.Join(dir, "ledger.jsonl")})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Kill()
	want := "cannot register with " + addr + ": connection refused; retrying"
	waitLogCount(t, &w.Proc, want, 1, 10*time.Second)
	waitLogCount(t, &w.Proc, want, 2, 20*time.Second)
	if err := w.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if strings.Contains(w.Log(), "deregister") {
		t.Fatalf("a Worker that never registered says it deregistered:\n%s", harness.Tail(w.Log(), 5))
	}
}

func TestDemoWorker_SaysItsLeaderAndLeavesTheWorkerListOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: binDir, Dir: dir, Size: 1, Args: fastArgs})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, cluster: c, ledger: filepath.Join(dir, "ledger.jsonl")}
	t.Cleanup(e.stop)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	leader := e.waitReady()
	if e.conn, err = client.Dial(c.Target(), c.DialOptions()...); err != nil {
		t.Fatal(err)
	}

	w := e.startWorker("")
	waitLogCount(t, &w.Proc, fmt.Sprintf("registered with leader %s at %s", leader.ID, leader.GRPCAddr), 1, 20*time.Second)
	listed := func() bool {
		got, err := dexv1.NewAdminServiceClient(e.conn).ListWorkers(e.ctx(10*time.Second), &dexv1.ListWorkersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ws := range got.Workers {
			if ws.Worker.Id == w.Name {
				return true
			}
		}
		return false
	}
	if !listed() {
		t.Fatalf("%s registered but is not in the Worker list", w.Name)
	}

	start := time.Now()
	if err := w.Stop(15 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("%s exited %s after SIGTERM", w.Name, time.Since(start).Round(time.Millisecond))
	if listed() {
		t.Fatalf("%s exited after SIGTERM but is still in the Worker list (its TTL is a minute)", w.Name)
	}
	if !strings.Contains(w.Log(), `"deregistered"`) {
		t.Fatalf("no deregistration in the log:\n%s", harness.Tail(w.Log(), 5))
	}
}
