//go:build e2e

package soak

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// binDir holds dexd, dexworker and dexctl built once for the package.
var binDir string

func TestMain(m *testing.M) { harness.RunWithBinaries(m, &binDir, "dexd", "dexworker", "dexctl") }

// env is one real cluster, stopped when the test ends: the soak's checks
// run against it as they do at the end of a soak.
type env struct {
	t       *testing.T
	dir     string
	cluster *harness.Cluster
	conn    *grpc.ClientConn
	client  *client.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: binDir, Dir: dir, Args: append([]string{}, harness.ClusterArgs...)})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, cluster: c}
	t.Cleanup(e.stop)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitReady(e.ctx(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(c.Target(), c.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	e.conn, e.client = conn, client.New(conn)
	return e
}

func (e *env) stop() {
	e.cluster.KillAll()
	if e.conn != nil {
		e.conn.Close()
	}
	if e.t.Failed() {
		for _, n := range e.cluster.Nodes {
			e.t.Logf("--- %s log tail:\n%s", n.ID, harness.Tail(n.Log(), 15))
		}
	}
}

func (e *env) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	e.t.Cleanup(cancel)
	return ctx
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
