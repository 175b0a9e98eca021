//go:build e2e

package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// forwardedCalls sums dex_forwarded_calls_total over every node and
// partition of c.
func forwardedCalls(t *testing.T, c *testCluster) int {
	t.Helper()
	total := 0
	for _, addr := range c.http {
		sc := bufio.NewScanner(strings.NewReader(metricsOf(t, addr)))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "dex_forwarded_calls_total{") {
				continue
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			total += int(v)
		}
	}
	return total
}

// partitionTerms is each partition's leader and term, as the first node
// that answers sees them.
func partitionTerms(t *testing.T, c *testCluster) string {
	t.Helper()
	for _, addr := range c.grpc {
		if ps, err := partitionLeaders(addr); err == nil {
			var b strings.Builder
			for _, p := range ps {
				fmt.Fprintf(&b, "%d:%s@%d ", p.Id, p.Leader, p.Term)
			}
			return b.String()
		}
	}
	t.Fatal("no node answered Status")
	return ""
}

// Go's Worker and client libraries call each partition's leader directly
// once they have learned the partition map from their calls' trailers: in
// a steady cluster, no node forwards any of their calls. A client that
// knows one node only is still served, through a forward.
func TestLibrariesCallEachPartitionsLeaderDirectly(t *testing.T) {
	c := newTestCluster(t)
	c.extra = []string{"--partitions", fmt.Sprint(testPartitions)}
	c.startAll(t)
	waitPartitionsServed(t, c)
	waitLeadersSpread(t, c)
	startDemoWorker(t, c, t.TempDir())

	conn, err := client.Dial("dex:///" + strings.Join(c.grpc, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := client.New(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	turns := func(ids []string) []string {
		for i, id := range ids {
			if _, err := cl.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: fmt.Sprintf("hello %d", i)}); err != nil {
				t.Fatalf("create %s: %v", id, err)
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			waitUntil(t, 60*time.Second, "session "+id+" idle", func() (bool, string) {
				s, err := cl.GetSession(ctx, id)
				if err != nil {
					return false, err.Error()
				}
				return s.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE, s.Session.Status.String()
			})
		}
		return ids
	}
	// The first calls teach the libraries the map: the client's and the
	// Worker's, so each partition must have had a session (nine random
	// ids miss one partition of three in about one run of twelve).
	turns(idsInEveryPartition(3))
	var ids []string
	for try := 1; ; try++ {
		terms := partitionTerms(t, c)
		before := forwardedCalls(t, c)
		ids = turns(idsInEveryPartition(4))
		got := forwardedCalls(t, c) - before
		if got == 0 {
			break
		}
		// A leadership that moved meanwhile (an election on a loaded
		// machine) makes a forward right: the cluster was not steady.
		if after := partitionTerms(t, c); after == terms || try == 3 {
			t.Fatalf("the nodes forwarded %d calls of 12 sessions' turns (partition terms %s, then %s); the libraries should have called each partition's leader", got, terms, after)
		}
	}
	// dexctl given one node reaches a session of a partition that node
	// does not lead through a forward, which the metric counts.
	ps, err := partitionLeaders(c.grpc[0])
	if err != nil {
		t.Fatal(err)
	}
	var other string
	for _, id := range ids {
		if ps[wirerules.PartitionOf(id, testPartitions)].LeaderGrpcAddress != c.grpc[0] {
			other = id
			break
		}
	}
	if other == "" {
		t.Fatalf("every session lives in the partition %s leads", c.grpc[0])
	}
	before := forwardedCalls(t, c)
	if out, err := dexctl(t, c.grpc[:1], "session", "show", other); err != nil || !strings.Contains(string(out), other) {
		t.Fatalf("dexctl --addr %s session show %s: %v %s", c.grpc[0], other, stderrOf(err), out)
	}
	if got := forwardedCalls(t, c) - before; got < 1 {
		t.Fatalf("a show through a node that does not lead the session's partition: %d calls forwarded, want at least 1", got)
	}
}

// idsInEveryPartition draws new session ids until each of the test
// cluster's partitions has perPartition of them.
func idsInEveryPartition(perPartition int) []string {
	var ids []string
	count := make([]int, testPartitions)
	for len(ids) < perPartition*testPartitions {
		id := client.NewSessionID()
		if k := wirerules.PartitionOf(id, testPartitions); count[k] < perPartition {
			count[k]++
			ids = append(ids, id)
		}
	}
	return ids
}
