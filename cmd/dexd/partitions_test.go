//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

const testPartitions = 3

// partitionLeaders asks the node at addr for each partition's leader.
func partitionLeaders(addr string) ([]*dexv1.PartitionStatus, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := dexv1.NewAdminServiceClient(conn).Status(ctx, &dexv1.StatusRequest{})
	if err != nil {
		return nil, err
	}
	return st.Partitions, nil
}

// waitPartitionsServed waits until every node names a leader for every
// partition, the same one, and answers /readyz with 200.
func waitPartitionsServed(t *testing.T, c *testCluster) []*dexv1.PartitionStatus {
	t.Helper()
	var parts []*dexv1.PartitionStatus
	waitUntil(t, 30*time.Second, "every node serving every partition", func() (bool, string) {
		var first []string
		for i, addr := range c.grpc {
			if c.procs[i] == nil {
				continue
			}
			ps, err := partitionLeaders(addr)
			if err != nil || len(ps) != testPartitions {
				return false, fmt.Sprintf("n%d: %v %v", i+1, ps, err)
			}
			var leaders []string
			for _, p := range ps {
				if p.Leader == "" || p.LeaderGrpcAddress == "" {
					return false, fmt.Sprintf("n%d: partition %d has no leader", i+1, p.Id)
				}
				leaders = append(leaders, p.Leader)
			}
			if first == nil {
				first, parts = leaders, ps
			} else if strings.Join(first, ",") != strings.Join(leaders, ",") {
				return false, fmt.Sprintf("leaders %v and %v", first, leaders)
			}
			if code, body := readyz(c.http[i]); code != 200 {
				return false, fmt.Sprintf("n%d /readyz %d %s", i+1, code, body)
			}
		}
		return true, ""
	})
	return parts
}

// waitLeadersSpread waits until the balancer has left each node leading
// one partition, as dexctl status --json shows.
func waitLeadersSpread(t *testing.T, c *testCluster) {
	t.Helper()
	waitUntil(t, 30*time.Second, "one partition leader on each node", func() (bool, string) {
		out, err := dexctl(t, c.grpc, "status", "--json")
		if err != nil {
			return false, stderrOf(err)
		}
		var st struct {
			Partitions []struct {
				ID     int    `json:"id"`
				Leader string `json:"leader"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			return false, err.Error()
		}
		leads := map[string]bool{}
		for _, p := range st.Partitions {
			leads[p.Leader] = true
		}
		return len(st.Partitions) == testPartitions && len(leads) == 3 && !leads[""], string(out)
	})
}

// startDemoWorker runs dexworker (its built-in script) on every node of c.
func startDemoWorker(t *testing.T, c *testCluster, dir string) {
	t.Helper()
	runDexworker(t, c, dir, "--ledger", filepath.Join(dir, "ledger.jsonl"), "--poll-wait", "2s")
}

// startIn starts a session through the node at addr and returns its id.
func startIn(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := exec.Command(dexctlBin, append([]string{"--addr", addr, "session", "start"}, args...)...).Output()
	if err != nil {
		t.Fatalf("session start %v through %s: %v", args, addr, stderrOf(err))
	}
	lines := strings.Fields(string(out))
	return lines[len(lines)-1]
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Sprintf("%v: %s", err, ee.Stderr)
	}
	return err.Error()
}

// waitTurnDone waits for a session to finish its first turn.
func waitTurnDone(t *testing.T, addrs []string, id string) {
	t.Helper()
	waitUntil(t, 60*time.Second, "session "+id+" idle after its turn", func() (bool, string) {
		s, err := showSession(t, addrs, id)
		if err != nil {
			return false, err.Error()
		}
		return s.Status == "idle", s.Status + " " + s.LastError
	})
}

// A cluster of three partitions runs sessions in each, whichever node a
// call reaches: every node serves every partition (its /readyz is 200),
// each partition has its own leader, a session lives in the partition its
// id hashes to, a child in its parent's, and one Worker connection polls
// them all.
func TestPartitionedClusterServesEverySessionFromAnyNode(t *testing.T) {
	c := newTestCluster(t)
	c.extra = []string{"--partitions", fmt.Sprint(testPartitions)}
	c.startAll(t)
	waitPartitionsServed(t, c)
	// The balancer leaves each node leading one partition, as dexctl
	// status --json shows.
	waitLeadersSpread(t, c)
	startDemoWorker(t, c, t.TempDir())

	// One partition's leadership moves where an operator says.
	ps, err := partitionLeaders(c.grpc[0])
	if err != nil {
		t.Fatal(err)
	}
	to := ps[0].Leader
	out, err := dexctl(t, c.grpc, "node", "transfer-leadership", to, "--partition", "2")
	if err != nil || !strings.Contains(string(out), "leadership transferred to "+to) {
		t.Fatalf("transfer partition 2's leadership to %s: %v %s", to, err, out)
	}

	// Each partition's series carry its number.
	for k := range testPartitions {
		if body := metricsOf(t, c.http[0]); !strings.Contains(body, fmt.Sprintf(`dex_raft_term{partition="%d"}`, k)) {
			t.Fatalf("no dex_raft_term of partition %d in /metrics:\n%s", k, body)
		}
	}

	ids := map[int][]string{}
	for i := range 12 {
		id := startIn(t, c.grpc[i%3], "--message", fmt.Sprintf("hello %d", i))
		k := wirerules.PartitionOf(id, testPartitions)
		ids[k] = append(ids[k], id)
	}
	if len(ids) < 2 {
		t.Fatalf("12 sessions all in one partition: %v", ids)
	}
	for _, k := range []int{0, 1, 2} {
		for _, id := range ids[k] {
			waitTurnDone(t, c.grpc[2:], id)
		}
	}

	// A child lives in its parent's partition: an id the cluster draws
	// does; one of another partition is refused, naming the rule.
	parent := ids[0][0]
	if len(ids[1]) > 0 {
		parent = ids[1][0]
	}
	pk := wirerules.PartitionOf(parent, testPartitions)
	child := createChild(t, c.grpc[1], parent)
	if got := wirerules.PartitionOf(child, testPartitions); got != pk {
		t.Fatalf("child %s lives in partition %d, its parent %s in %d", child, got, parent, pk)
	}
	waitTurnDone(t, c.grpc, child)
	// dexctl draws a child's id itself (so a retry is recognised), in
	// the parent's partition.
	child2 := startIn(t, c.grpc[2], "--parent", parent, "--message", "more child work")
	if got := wirerules.PartitionOf(child2, testPartitions); got != pk {
		t.Fatalf("dexctl's child %s lives in partition %d, its parent %s in %d", child2, got, parent, pk)
	}
	waitTurnDone(t, c.grpc, child2)
	other := "child-x"
	for i := 0; wirerules.PartitionOf(other, testPartitions) == pk; i++ {
		other = fmt.Sprintf("child-%d", i)
	}
	out, err = exec.Command(dexctlBin, "--addr", c.grpc[0], "session", "start", "--id", other, "--parent", parent, "--message", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "a child session lives in its parent's partition") {
		t.Fatalf("a child id of another partition: %v\n%s", err, out)
	}

	// An import reaches the partition of the session it holds, through
	// any node.
	for k, some := range ids {
		exportDeleteImport(t, c, some[0], c.grpc[(k+1)%3])
	}

	// Every node lists every session once, across pages.
	want := 14
	for _, addr := range c.grpc {
		seen := map[string]int{}
		token := ""
		for range 20 {
			page := listPage(t, addr, token, 4)
			for _, s := range page.Sessions {
				seen[s.Id]++
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
		if len(seen) != want {
			t.Fatalf("%s lists %d sessions across pages, want %d: %v", addr, len(seen), want, seen)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("%s lists %s %d times", addr, id, n)
			}
		}
	}
}

// createChild creates a child of parent through addr, with the id the
// cluster draws.
func createChild(t *testing.T, addr, parent string) string {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := dexv1.NewSessionServiceClient(conn).CreateSession(ctx, &dexv1.CreateSessionRequest{ParentId: parent, Message: "child work"})
	if err != nil {
		t.Fatalf("create a child of %s through %s: %v", parent, addr, err)
	}
	return resp.Session.Id
}

// A session exported, deleted and imported again through any node comes
// back in its own partition, whole.
func exportDeleteImport(t *testing.T, c *testCluster, id string, through string) {
	t.Helper()
	obj, err := dexctl(t, c.grpc, "session", "export", id)
	if err != nil {
		t.Fatalf("export %s: %v", id, stderrOf(err))
	}
	file := filepath.Join(t.TempDir(), id+".dexarchive")
	if err := os.WriteFile(file, obj, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := dexctl(t, c.grpc, "session", "delete", id); err != nil {
		t.Fatalf("delete %s: %v %s", id, stderrOf(err), out)
	}
	waitUntil(t, 30*time.Second, id+" imported again", func() (bool, string) {
		out, err := exec.Command(dexctlBin, "--addr", through, "session", "import", file).CombinedOutput()
		return err == nil, string(out)
	})
	s, err := showSession(t, c.grpc, id)
	if err != nil || s.Status != "idle" || len(s.Steps) == 0 {
		t.Fatalf("imported %s: %+v %v", id, s, err)
	}
}

func listPage(t *testing.T, addr, token string, size uint32) *dexv1.ListSessionsResponse {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := dexv1.NewSessionServiceClient(conn).ListSessions(ctx, &dexv1.ListSessionsRequest{PageToken: token, PageSize: size})
	if err != nil {
		t.Fatalf("list sessions through %s: %v", addr, err)
	}
	return resp
}

// metricsOf is a node's /metrics ("" while it does not answer).
func metricsOf(t *testing.T, httpAddr string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// appliedOf reads each partition's applied index from a node's /metrics.
func appliedOf(t *testing.T, httpAddr string) map[int]uint64 {
	t.Helper()
	out := map[int]uint64{}
	for _, line := range strings.Split(metricsOf(t, httpAddr), "\n") {
		var k int
		var v float64
		if n, _ := fmt.Sscanf(line, `dex_raft_applied_index{partition="%d"} %g`, &k, &v); n == 2 {
			out[k] = uint64(v)
		}
	}
	return out
}

// Membership acts on every partition: a fourth node that joins through
// any member replicates every partition's log; once removed, it is in no
// partition's group, so the three others keep a quorum in each with one
// of them down too.
func TestPartitionedClusterJoinsAndRemovesANodeInEveryPartition(t *testing.T) {
	c := newTestCluster(t)
	c.extra = []string{"--partitions", fmt.Sprint(testPartitions)}
	c.startAll(t)
	waitPartitionsServed(t, c)
	startDemoWorker(t, c, t.TempDir())
	for i := range 6 {
		waitTurnDone(t, c.grpc, startIn(t, c.grpc[i%3], "--message", fmt.Sprintf("before %d", i)))
	}

	more := freeAddrs(t, 3)
	n4 := startDexd(t, "--id", "n4", "--data-dir", t.TempDir(), "--raft-addr", more[0], "--grpc-addr", more[1],
		"--http-addr", more[2], "--join", c.grpc[1], "--partitions", fmt.Sprint(testPartitions))
	waitUntil(t, 60*time.Second, "n4 applying every partition's log", func() (bool, string) {
		mine, theirs := appliedOf(t, more[2]), appliedOf(t, c.http[0])
		for k := range testPartitions {
			if mine[k] == 0 || mine[k] < theirs[k] {
				return false, fmt.Sprintf("n4 %v, n1 %v", mine, theirs)
			}
		}
		return true, ""
	})
	if code, body := readyz(more[2]); code != 200 {
		t.Fatalf("n4 /readyz %d %s", code, body)
	}
	waitUntil(t, 60*time.Second, "n4 promoted to voter in every partition", func() (bool, string) {
		ps, err := partitionLeaders(c.grpc[0])
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if !slices.Contains(p.Voters, "n4") {
				return false, fmt.Sprintf("partition %d: voters %v, non-voters %v", p.Id, p.Voters, p.Nonvoters)
			}
		}
		return true, ""
	})

	if out, err := dexctl(t, c.grpc, "node", "remove", "n4", "--yes"); err != nil {
		t.Fatalf("dexctl node remove n4: %v %s", stderrOf(err), out)
	}
	ps, err := partitionLeaders(c.grpc[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if slices.Contains(p.Voters, "n4") || slices.Contains(p.Nonvoters, "n4") {
			t.Fatalf("partition %d still holds n4: voters %v, non-voters %v", p.Id, p.Voters, p.Nonvoters)
		}
	}
	n4.kill()
	c.procs[2].kill()
	c.procs[2] = nil
	waitPartitionsServed(t, c)
	for i := range 6 {
		waitTurnDone(t, c.grpc[:2], startIn(t, c.grpc[i%2], "--message", fmt.Sprintf("after %d", i)))
	}
}
