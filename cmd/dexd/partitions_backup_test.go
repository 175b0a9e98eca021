//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// A cluster of three partitions is backed up and restored whole: `dexctl
// snapshot save` writes a backup of each partition into one file, which
// inspect shows partition by partition; `dexctl snapshot restore --yes`
// brings back exactly the sessions of the backup in every partition,
// dropping those created since, and new turns run in every partition.
func TestPartitionedClusterBackupRestoresEveryPartition(t *testing.T) {
	c := newTestCluster(t)
	c.extra = []string{"--partitions", fmt.Sprint(testPartitions)}
	c.startAll(t)
	waitPartitionsServed(t, c)
	startDemoWorker(t, c, t.TempDir())

	backedUp := startInEveryPartition(t, c, "kept", 2)
	file := filepath.Join(t.TempDir(), "dex.backup")
	out, err := dexctl(t, c.grpc, "snapshot", "save", file)
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("saved %s: %d partitions of cluster ", file, testPartitions)) {
		t.Fatalf("snapshot save: %s %s", out, errText(err))
	}
	out, err = dexctl(t, nil, "snapshot", "inspect", file, "--json")
	if err != nil {
		t.Fatalf("snapshot inspect: %s", errText(err))
	}
	var in struct {
		Partitions int `json:"partitions"`
		Sections   []struct {
			Partition int `json:"partition"`
			Counts    struct {
				Sessions map[string]int `json:"sessions"`
			} `json:"counts"`
		} `json:"sections"`
	}
	if err := json.Unmarshal(out, &in); err != nil || in.Partitions != testPartitions || len(in.Sections) != testPartitions {
		t.Fatalf("snapshot inspect --json printed %s (%v)", out, err)
	}
	for k, sec := range in.Sections {
		if sec.Partition != k || sec.Counts.Sessions["idle"] != len(backedUp[k]) {
			t.Fatalf("partition %d's backup holds %v sessions, want %d idle: %s", k, sec.Counts.Sessions, len(backedUp[k]), out)
		}
	}

	later := startInEveryPartition(t, c, "later", 1)
	// Without --yes the cluster, which holds sessions, is not touched.
	if out, err := dexctl(t, c.grpc, "snapshot", "restore", file); err == nil || !strings.Contains(errText(err), "nothing was restored") {
		t.Fatalf("restore without --yes: %s %s", out, errText(err))
	}
	wantSessions(t, c, append(flatten(backedUp), flatten(later)...))

	// Through any node.
	out, err = dexctl(t, c.grpc[1:2], "snapshot", "restore", file, "--yes")
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("every one of its %d partitions: %d sessions", testPartitions, len(flatten(backedUp)))) {
		t.Fatalf("snapshot restore: %s %s", out, errText(err))
	}
	wantSessions(t, c, flatten(backedUp))
	for _, id := range flatten(later) {
		waitUntil(t, 30*time.Second, "an answer about "+id, func() (bool, string) {
			_, err := getSession(c.grpc[0], id)
			switch status.Code(err) {
			case codes.NotFound:
				return true, ""
			case codes.Unavailable, codes.DeadlineExceeded:
				return false, err.Error() // a partition's leadership moving
			}
			t.Fatalf("session %s, created after the backup, after the restore: %v", id, err)
			return false, ""
		})
	}

	// A new turn runs in every partition.
	for k, ids := range backedUp {
		id := ids[0]
		if out, err := dexctl(t, c.grpc, "session", "send", id, fmt.Sprintf("after the restore %d", k)); err != nil {
			t.Fatalf("send to %s: %s %s", id, out, errText(err))
		}
		waitUntil(t, 60*time.Second, "a second turn of "+id, func() (bool, string) {
			s, err := getSession(c.grpc[k], id)
			if err != nil {
				return false, err.Error()
			}
			return s.Session.TurnsCompleted == 2 && s.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE, s.Session.String()
		})
	}
}

// startInEveryPartition starts n sessions in each partition of c, ids
// named after prefix, through each node in turn, and waits for their
// first turns; it returns each partition's ids.
func startInEveryPartition(t *testing.T, c *testCluster, prefix string, n int) map[int][]string {
	t.Helper()
	ids := map[int][]string{}
	for i := 0; len(flatten(ids)) < n*testPartitions; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		k := wirerules.PartitionOf(id, testPartitions)
		if len(ids[k]) == n {
			continue
		}
		startIn(t, c.grpc[i%3], "--id", id, "--message", "hello "+id)
		ids[k] = append(ids[k], id)
	}
	for _, id := range flatten(ids) {
		waitTurnDone(t, c.grpc, id)
	}
	return ids
}

func flatten(ids map[int][]string) []string {
	var out []string
	for k := range testPartitions {
		out = append(out, ids[k]...)
	}
	return out
}

// wantSessions checks that every node lists exactly the sessions want. A
// listing that fails (a partition's leadership moving) is asked again.
func wantSessions(t *testing.T, c *testCluster, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	for _, addr := range c.grpc {
		waitUntil(t, 30*time.Second, "a listing of every session through "+addr, func() (bool, string) {
			got, err := listAll(addr)
			if err != nil {
				return false, err.Error()
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s lists sessions %v, want %v", addr, got, want)
			}
			return true, ""
		})
	}
}

// listAll lists every session through addr, sorted.
func listAll(addr string) ([]string, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var ids []string
	req := &dexv1.ListSessionsRequest{PageSize: 50}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := dexv1.NewSessionServiceClient(conn).ListSessions(ctx, req)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, s := range page.Sessions {
			ids = append(ids, s.Id)
		}
		if page.NextPageToken == "" {
			slices.Sort(ids)
			return ids, nil
		}
		req.PageToken = page.NextPageToken
	}
}

func getSession(addr, id string) (*dexv1.GetSessionResponse, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return dexv1.NewSessionServiceClient(conn).GetSession(ctx, &dexv1.GetSessionRequest{SessionId: id})
}

// errText is a dexctl run's error with what it printed on stderr.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return stderrOf(err)
}
