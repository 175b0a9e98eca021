//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// binDir holds dexd, dexworker and dexctl built once for the package.
var binDir string

func TestMain(m *testing.M) { harness.RunWithBinaries(m, &binDir, "dexd", "dexworker", "dexctl") }

// fastArgs shorten the timeouts a test would otherwise wait out.
var fastArgs = []string{"--heartbeat-timeout", "3s", "--heartbeat-interval", "500ms"}

// env is one real cluster with its Workers, stopped when the test ends.
type env struct {
	t       testing.TB
	dir     string
	cluster *harness.Cluster
	conn    *grpc.ClientConn
	client  *client.Client
	workers []*harness.Worker
	ledger  string
}

func newEnv(t testing.TB, args ...string) *env {
	t.Helper()
	return newEnvTLS(t, nil, args...)
}

// newEnvTLS is newEnv with the nodes on mutual TLS with pki (nil: as
// DEX_CHAOS_TLS says); the env's client, Workers and dexctl use its client
// certificate.
func newEnvTLS(t testing.TB, pki func(dir string) *harness.PKI, args ...string) *env {
	t.Helper()
	dir := t.TempDir()
	opts := harness.ClusterOptions{BinDir: binDir, Dir: dir, Args: append(append([]string{}, fastArgs...), args...)}
	if pki != nil {
		opts.TLS = pki(dir)
	}
	c, err := harness.NewCluster(opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, cluster: c, ledger: filepath.Join(dir, "ledger.jsonl")}
	t.Cleanup(e.stop)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitReady()
	conn, err := client.Dial(c.Target(), c.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	e.conn, e.client = conn, client.New(conn)
	return e
}

func (e *env) stop() {
	for _, w := range e.workers {
		w.Kill()
	}
	e.cluster.KillAll()
	if e.conn != nil {
		e.conn.Close()
	}
	if e.t.Failed() {
		for _, n := range e.cluster.Nodes {
			e.t.Logf("--- %s log tail:\n%s", n.ID, harness.Tail(n.Log(), 15))
		}
		for _, w := range e.workers {
			e.t.Logf("--- %s log tail:\n%s", w.Name, harness.Tail(w.Log(), 15))
		}
	}
}

func (e *env) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) waitReady() *harness.Node {
	e.t.Helper()
	n, err := e.cluster.WaitReady(e.ctx(20 * time.Second))
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// startWorker starts a dexworker on the readiness-following target.
func (e *env) startWorker(script string, hold ...string) *harness.Worker {
	e.t.Helper()
	o := harness.WorkerOptions{BinDir: binDir, Dir: e.dir, Name: fmt.Sprintf("w%d", len(e.workers)+1), Target: e.cluster.Target(), Ledger: e.ledger, Hold: hold, TLS: e.cluster.TLS()}
	if script != "" {
		o.Script = filepath.Join(e.dir, "script.json")
		if err := os.WriteFile(o.Script, []byte(script), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	token, err := e.cluster.WorkerToken(e.ctx(30*time.Second), o.Name)
	if err != nil {
		e.t.Fatal(err)
	}
	o.Token = token
	w := harness.NewWorker(o)
	e.workers = append(e.workers, w)
	if err := w.Start(); err != nil {
		e.t.Fatal(err)
	}
	return w
}

func (e *env) createSession(msg string) string {
	e.t.Helper()
	s, err := e.client.CreateSession(e.ctx(20*time.Second), &dexv1.CreateSessionRequest{SessionId: fmt.Sprintf("s-%d", time.Now().UnixNano()), Message: msg})
	if err != nil {
		e.t.Fatalf("create session: %v", err)
	}
	return s.Id
}

func (e *env) get(id string) *dexv1.GetSessionResponse {
	e.t.Helper()
	r, err := e.client.GetSession(e.ctx(20*time.Second), id)
	if err != nil {
		e.t.Fatalf("get session %s: %v", id, err)
	}
	return r
}

// waitFor polls the session until cond holds.
func (e *env) waitFor(id string, d time.Duration, what string, cond func(*dexv1.GetSessionResponse) bool) *dexv1.GetSessionResponse {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := e.get(id)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("session %s: %s not reached within %s; status %s, steps:\n%s", id, what, d, fsm.StatusName(fsmpb.SessionStatus(r.Session.Status)), describe(r.Steps))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) waitStatus(id string, st dexv1.SessionStatus, d time.Duration) *dexv1.GetSessionResponse {
	e.t.Helper()
	return e.waitFor(id, d, fsm.StatusName(fsmpb.SessionStatus(st)), func(r *dexv1.GetSessionResponse) bool { return r.Session.Status == st })
}

func (e *env) ledgerEntries() []harness.LedgerEntry {
	e.t.Helper()
	l, err := harness.ReadLedger(e.ledger)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// dexctl runs the CLI against every node and decodes its JSON output.
func (e *env) dexctl(out any, args ...string) {
	e.t.Helper()
	full := append([]string{"--addr", strings.Join(e.cluster.GRPCAddrs(), ",")}, args...)
	if p := e.cluster.TLS(); p != nil {
		full = append(full, harness.Args(p.ClientFiles())...)
	}
	cmd := exec.Command(filepath.Join(binDir, "dexctl"), full...)
	if e.cluster.AdminToken != "" {
		cmd.Env = append(os.Environ(), client.TokenEnv+"="+e.cluster.AdminToken)
	}
	b, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		e.t.Fatalf("dexctl %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("dexctl %s: %v in %q", strings.Join(args, " "), err, b)
		}
	}
}

// leader returns the node that serves now.
func (e *env) leader() *harness.Node { return e.waitReady() }
