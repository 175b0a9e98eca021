package chaos

import (
	"context"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// TestCluster is a cluster the user names for certify instead of the fresh
// one it starts: certify does not own its nodes, so only the Worker-kill
// column runs, and no other Worker may serve the model or the tools while
// it runs (a Step handed to one would escape the cell).
type TestCluster struct {
	// Target is what the Worker and certify dial (dex:///a,b,c or host:port).
	Target string
	// DialOptions: TLS and the token for certify's own calls.
	DialOptions []grpc.DialOption
	// Token is the Worker's $DEX_TOKEN ("": none).
	Token string
	// RunID makes the Worker ids of this run unique on the cluster.
	RunID string
}

// connectTestCluster dials the user's cluster for a cell.
func (e *cellEnv) connectTestCluster(tc *TestCluster) error {
	var err error
	if e.conn, err = client.Dial(tc.Target, tc.DialOptions...); err != nil {
		return err
	}
	e.cl, e.admin = client.New(e.conn), dexv1.NewAdminServiceClient(e.conn)
	e.target = tc.Target
	e.notef("the test cluster %s", tc.Target)
	return nil
}

// workerName is the id a cell's nth Worker is asked to use (DEX_WORKER_ID).
func (e *cellEnv) workerName(n int) string {
	if tc := e.opts.TestCluster; tc != nil {
		return fmt.Sprintf("certify-%s-%08x-w%d", tc.RunID, crc32.ChecksumIEEE([]byte(e.cell.Name())), n)
	}
	return fmt.Sprintf("w%d", n)
}

// live: the Worker polls now or was heard from lately.
func live(w *dexv1.WorkerStatus) bool {
	return w.GetOpenPolls() > 0 || time.Since(time.UnixMilli(w.GetLastContactMs())) < 10*time.Second
}

// CheckTestClusterFree refuses a test cluster where a live Worker serves
// the model or one of the tools: it could take the cells' Steps.
func CheckTestClusterFree(ctx context.Context, tc *TestCluster, tools []CertifyTool) error {
	conn, err := client.Dial(tc.Target, tc.DialOptions...)
	if err != nil {
		return err
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := dexv1.NewAdminServiceClient(conn).ListWorkers(cctx, &dexv1.ListWorkersRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("list the test cluster's Workers: %w", err)
	}
	var busy []string
	for _, w := range resp.Workers {
		info := w.GetWorker()
		if strings.HasPrefix(info.GetId(), "certify-"+tc.RunID+"-") || !live(w) {
			continue // this run's own, or gone (a killed Worker stays listed a while)
		}
		if info.GetRunsModel() {
			busy = append(busy, info.GetId()+" (runs the model)")
			continue
		}
		for _, s := range info.GetTools() {
			if slices.ContainsFunc(tools, func(t CertifyTool) bool { return t.Name == s.Name }) {
				busy = append(busy, fmt.Sprintf("%s (serves %s)", info.GetId(), s.Name))
				break
			}
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("the test cluster has Workers that could take certify's Steps: %s; stop them, or let certify start its own cluster (no --cluster)", strings.Join(busy, ", "))
	}
	return nil
}
