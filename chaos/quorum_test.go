//go:build e2e

package chaos

import (
	"github.com/dexhq/dex/chaos/harness"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With one node of three up no leader can be elected: dexctl says so in
// one sentence soon after, instead of waiting out --wait, and the
// console's page says the same.
func TestLostQuorumIsSaidPlainly(t *testing.T) {
	e := newEnv(t)
	leader := e.waitReady()
	waitUntil(t, 30*time.Second, "every node to record its gRPC address and answer", func() bool {
		var st struct {
			Nodes []struct {
				GRPCAddress string `json:"grpc_address"`
				State       string `json:"state"`
			} `json:"nodes"`
		}
		e.dexctl(&st, "status", "--json")
		for _, n := range st.Nodes {
			if n.GRPCAddress == "" || n.State == "unreachable" {
				return false
			}
		}
		return len(st.Nodes) == 3
	})
	var survivor *harness.Node
	for _, n := range e.cluster.Nodes {
		if n.ID != leader.ID && survivor == nil {
			survivor = n
			continue
		}
		n.Kill()
	}

	start := time.Now()
	cmd := exec.Command(filepath.Join(binDir, "dexctl"), "--addr", strings.Join(e.cluster.GRPCAddrs(), ","), "--wait", "2m",
		"session", "start", "--message", "hello")
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	t.Logf("dexctl session start with %s alone ended after %s: %v: %s", survivor.ID, took.Round(time.Millisecond), err, out)
	if err == nil || !strings.Contains(string(out), "1 of 3 voters reachable: no quorum") {
		t.Fatalf("dexctl session start printed %q (%v); want it to say 1 of 3 voters reachable: no quorum", out, err)
	}
	if took > time.Minute {
		t.Fatalf("dexctl took %s to say so: it waited for a leader", took)
	}

	start = time.Now()
	resp, err := (&http.Client{Timeout: time.Minute}).Get("http://" + survivor.HTTPAddr + "/ui/sessions")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("the console's sessions page answered %d after %s", resp.StatusCode, time.Since(start).Round(time.Millisecond))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "1 of 3 voters reachable: no quorum") {
		t.Fatalf("the console answered %d:\n%s\nwant 503 saying 1 of 3 voters reachable: no quorum", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "NOT_SERVING") {
		t.Fatalf("the console shows the channel's error:\n%s", body)
	}
}
