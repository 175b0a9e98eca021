package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// ACLEnv switches ACLs on for every cluster the harness starts: each dexd
// gets a bootstrap token file, the harness's own calls carry that admin
// token, and each Worker gets a worker token bound to its id.
const ACLEnv = "DEX_CHAOS_ACL"

// ACLFromEnv reports whether $DEX_CHAOS_ACL is 1.
func ACLFromEnv() bool { return os.Getenv(ACLEnv) == "1" }

// enableACL writes the bootstrap secret and returns the dexd flags for it.
func (c *Cluster) enableACL() ([]string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	c.AdminToken = hex.EncodeToString(b)
	file := filepath.Join(c.opts.Dir, "acl-bootstrap-token")
	if err := os.MkdirAll(c.opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, []byte(c.AdminToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	return []string{"--acl-bootstrap-token-file", file}, nil
}

// tokenOptions carry the cluster's admin token (none without ACLs).
func (c *Cluster) tokenOptions() []grpc.DialOption {
	if c.AdminToken == "" {
		return nil
	}
	return []grpc.DialOption{client.WithToken(c.AdminToken)}
}

// ConnOptions are the options of a plain gRPC connection to one node:
// its transport credentials and the admin token when ACLs are on.
func (c *Cluster) ConnOptions() []grpc.DialOption {
	return append([]grpc.DialOption{c.Creds()}, c.tokenOptions()...)
}

// WorkerToken creates a worker token bound to workerID; "" without ACLs.
func (c *Cluster) WorkerToken(ctx context.Context, workerID string) (string, error) {
	if c.AdminToken == "" {
		return "", nil
	}
	conn, err := client.Dial(c.Target(), c.DialOptions()...)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := dexv1.NewAdminServiceClient(conn).CreateToken(ctx, &dexv1.CreateTokenRequest{
		Name: "chaos " + workerID, Role: dexv1.TokenRole_TOKEN_ROLE_WORKER, WorkerId: workerID,
	}, grpc.WaitForReady(true))
	if err != nil {
		return "", fmt.Errorf("worker token for %s: %w", workerID, err)
	}
	return resp.Secret, nil
}

// tokenWorks reports whether n takes the admin token (true without ACLs).
func (c *Cluster) tokenWorks(ctx context.Context, n *Node) bool {
	if c.AdminToken == "" {
		return true
	}
	conn, err := grpc.NewClient(n.GRPCAddr, c.ConnOptions()...)
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = dexv1.NewAdminServiceClient(conn).ListTokens(ctx, &dexv1.ListTokensRequest{})
	return err == nil
}

// tokenWorksOnAll: every running node has applied the ACL bootstrap.
func (c *Cluster) tokenWorksOnAll(ctx context.Context) bool {
	for _, n := range c.Nodes {
		if n.Running() && !c.tokenWorks(ctx, n) {
			return false
		}
	}
	return true
}
