//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// dexctlAs runs the CLI with token in $DEX_TOKEN and decodes its JSON.
func (e *env) dexctlAs(token string, out any, args ...string) {
	e.t.Helper()
	full := []string{"--addr", strings.Join(e.cluster.GRPCAddrs(), ",")}
	if p := e.cluster.TLS(); p != nil {
		full = append(full, harness.Args(p.ClientFiles())...)
	}
	cmd := exec.Command(filepath.Join(binDir, "dexctl"), append(full, args...)...)
	cmd.Env = append(os.Environ(), client.TokenEnv+"="+token)
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

// codeOn makes call on one node directly, with token, and returns the code.
func codeOn(t *testing.T, c *harness.Cluster, n *harness.Node, token string, call func(ctx context.Context, conn *grpc.ClientConn) error) codes.Code {
	t.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr, c.Creds(), client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return status.Code(call(ctx, conn))
}

func listSessions(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := dexv1.NewSessionServiceClient(conn).ListSessions(ctx, &dexv1.ListSessionsRequest{})
	return err
}

func removeNode(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := dexv1.NewAdminServiceClient(conn).RemoveNode(ctx, &dexv1.RemoveNodeRequest{NodeId: "n1"})
	return err
}

// A 3-node cluster with ACLs on (bootstrapped from a token file) runs the
// demo session end to end with a client token and a dexworker holding a
// worker token; calls without a token, or with another role's, are refused
// and change nothing; a client token revoked on the leader is then refused
// by every node.
func TestACL_ThreeNodesRunTheDemoWithTokensAndARevokedTokenIsRefusedEverywhere(t *testing.T) {
	t.Setenv(harness.ACLEnv, "1")
	e := newEnv(t)
	if e.cluster.AdminToken == "" {
		t.Fatal("the harness did not turn ACLs on")
	}
	var created struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
		Role   string `json:"role"`
	}
	e.dexctl(&created, "token", "create", "--role", "client", "--name", "demo client", "--json")
	if created.Secret == "" || created.Role != "client" {
		t.Fatalf("token create printed %+v", created)
	}
	clientToken := created.Secret
	// A follower knows the token once it applied its creation.
	for _, n := range e.cluster.Nodes {
		waitUntil(t, 20*time.Second, n.ID+" to know the client token", func() bool {
			return codeOn(t, e.cluster, n, clientToken, listSessions) != codes.Unauthenticated
		})
	}

	// Without a token, or with a client token on an admin call, nothing is done.
	for _, n := range e.cluster.Nodes {
		if c := codeOn(t, e.cluster, n, "", listSessions); c != codes.Unauthenticated {
			t.Fatalf("%s: ListSessions without a token: %v; want Unauthenticated", n.ID, c)
		}
		if c := codeOn(t, e.cluster, n, "", removeNode); c != codes.Unauthenticated {
			t.Fatalf("%s: RemoveNode without a token: %v; want Unauthenticated", n.ID, c)
		}
		if c := codeOn(t, e.cluster, n, clientToken, removeNode); c != codes.PermissionDenied {
			t.Fatalf("%s: RemoveNode with a client token: %v; want PermissionDenied", n.ID, c)
		}
	}
	var st struct {
		Nodes []struct {
			ID string `json:"id"`
		} `json:"nodes"`
	}
	e.dexctl(&st, "status", "--json")
	if len(st.Nodes) != 3 {
		t.Fatalf("status lists %d nodes after the refused removals; want 3", len(st.Nodes))
	}

	// The demo session, as a client, served by a Worker with a worker token.
	e.startWorker("")
	var started struct {
		ID string `json:"id"`
	}
	e.dexctlAs(clientToken, &started, "session", "start", "--message", "demo", "--json")
	var show showJSON
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.dexctlAs(clientToken, &show, "session", "show", started.ID, "--json")
		if show.Status == "idle" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if show.Status != "idle" {
		t.Fatalf("session %s is %s after 30 s; want idle", started.ID, show.Status)
	}
	if len(show.Steps) < 3 {
		t.Fatalf("the demo ran %d steps; want the model and its tools", len(show.Steps))
	}
	for _, s := range show.Steps {
		if s.Outcome != "succeeded" {
			t.Fatalf("step %s (%s %s) is %q; want succeeded", s.ID, s.Kind, s.Tool, s.Outcome)
		}
	}

	// Every node refuses the client token once the revocation made on the
	// leader is applied there.
	e.dexctl(nil, "token", "revoke", created.ID)
	for _, n := range e.cluster.Nodes {
		waitUntil(t, 20*time.Second, n.ID+" to refuse the revoked token", func() bool {
			return codeOn(t, e.cluster, n, clientToken, listSessions) == codes.Unauthenticated
		})
	}
	var tokens []struct {
		ID      string `json:"id"`
		Revoked bool   `json:"revoked"`
	}
	e.dexctl(&tokens, "token", "list", "--json")
	revoked := false
	for _, tk := range tokens {
		if tk.ID == created.ID {
			revoked = tk.Revoked
		}
	}
	if !revoked {
		t.Fatalf("token list %+v does not show %s revoked", tokens, created.ID)
	}

	// A node joins with the admin token; its calls to the members carry it.
	addrs, err := harness.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	n4 := &harness.Node{ID: "n4", RaftAddr: addrs[0], GRPCAddr: addrs[1], HTTPAddr: addrs[2], DataDir: filepath.Join(e.dir, "n4")}
	n4.Name, n4.Bin, n4.LogPath = "dexd n4", filepath.Join(binDir, "dexd"), filepath.Join(e.dir, "n4.log")
	n4.Args = append([]string{"--id", "n4", "--data-dir", n4.DataDir, "--raft-addr", n4.RaftAddr, "--grpc-addr", n4.GRPCAddr,
		"--http-addr", n4.HTTPAddr, "--join", e.leader().GRPCAddr, "--acl"}, fastArgs...)
	if p := e.cluster.TLS(); p != nil {
		n4.Args = append(n4.Args, harness.Args(p.NodeFiles())...)
	}
	n4.Env = []string{client.TokenEnv + "=" + e.cluster.AdminToken}
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- n4 log tail:\n%s", harness.Tail(n4.Log(), 15))
		}
		n4.Kill()
	})
	waitUntil(t, 30*time.Second, "n4 to join as a voter", func() bool {
		var st struct {
			Nodes []struct {
				ID       string `json:"id"`
				Suffrage string `json:"suffrage"`
			} `json:"nodes"`
		}
		e.dexctl(&st, "status", "--json")
		for _, n := range st.Nodes {
			if n.ID == "n4" && n.Suffrage == "voter" {
				return true
			}
		}
		return false
	})
	waitUntil(t, 20*time.Second, "n4 to refuse the revoked token", func() bool {
		return codeOn(t, e.cluster, n4, clientToken, listSessions) == codes.Unauthenticated && codeOn(t, e.cluster, n4, e.cluster.AdminToken, listSessions) != codes.Unauthenticated
	})
}
