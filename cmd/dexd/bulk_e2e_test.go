//go:build e2e

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// createMany creates n sessions named prefix-i with labels and a message,
// conc at a time. With no Worker, each turn stays running.
func createMany(t *testing.T, ctx context.Context, svc dexv1.SessionServiceClient, prefix string, n, conc int, labels []*dexv1.Label) []string {
	t.Helper()
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
				if _, err := svc.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: ids[i], Message: "hello", Labels: labels}); err != nil {
					errs <- fmt.Errorf("create %s: %w", ids[i], err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

// cancelNotes counts the notes of a session's history that a bulk job's
// cancel wrote, and reports its status.
func cancelNotes(ctx context.Context, cl *client.Client, id string) (int, dexv1.SessionStatus, error) {
	r, err := cl.GetSession(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	n := 0
	for _, h := range r.Session.History {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_NOTE && strings.Contains(h.Text, "cancelled by bulk job") {
			n++
		}
	}
	return n, r.Session.Status, nil
}

// A bulk cancel of 5,000 sessions interrupted by a SIGKILL of the leader
// finishes under the next leader with every matched session cancelled
// exactly once and no other session touched.
func TestBulkCancelOf5000SessionsSurvivesALeaderKill(t *testing.T) {
	const matched, others = 5000, 50
	c := newTestCluster(t)
	// A pace between steps keeps the job running long enough to be
	// interrupted (50 steps of 100 sessions).
	c.extra = []string{"--bulk-pace", "40ms"}
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	conn, err := client.Dial("dex:///" + strings.Join(c.grpc, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := client.New(conn)
	svc := dexv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	began := time.Now()
	batch := []*dexv1.Label{{Key: "batch", Value: "nightly"}}
	ids := createMany(t, ctx, svc, "m", matched, 64, batch)
	kept := createMany(t, ctx, svc, "k", others, 16, []*dexv1.Label{{Key: "batch", Value: "other"}})
	t.Logf("%d sessions created in %s", matched+others, time.Since(began).Round(time.Millisecond))

	job, err := cl.StartBulkAction(ctx, &dexv1.StartBulkActionRequest{
		Action: dexv1.BulkAction_BULK_ACTION_CANCEL, Filter: &dexv1.BulkFilter{Labels: batch}, Reason: "nightly batch stopped",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Kill the leader once the job has acted on some sessions, not all.
	var before *dexv1.BulkJob
	waitUntil(t, 30*time.Second, "the job in the middle", func() (bool, string) {
		j, err := cl.GetBulkJob(ctx, job.Id)
		if err != nil {
			return false, err.Error()
		}
		before = j
		return j.Acted >= 1000, fmt.Sprintf("%s, %d acted", j.Status, j.Acted)
	})
	leader, _ := c.leaderIndex(t)
	c.procs[leader].kill()
	if before.Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING || before.Acted >= matched {
		t.Fatalf("the job was not in the middle when the leader was killed: %v", before)
	}
	t.Logf("leader n%d killed with the job at %d of %d", leader+1, before.Acted, matched)

	done, err := cl.WaitBulkJob(ctx, job.Id, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE || done.Acted != matched || done.Failed != 0 || len(done.Skipped) != 0 {
		t.Fatalf("the job ended as %v; want done with %d acted", done, matched)
	}

	// Every matched session was cancelled once; the others still run.
	var bad []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	var next atomic.Int64
	all := append(append([]string{}, ids...), kept...)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(all) {
					return
				}
				want, wantStatus := 1, dexv1.SessionStatus_SESSION_STATUS_IDLE
				if i >= matched {
					want, wantStatus = 0, dexv1.SessionStatus_SESSION_STATUS_RUNNING
				}
				n, st, err := cancelNotes(ctx, cl, all[i])
				if err != nil || n != want || st != wantStatus {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %d cancel notes, %s, %v", all[i], n, st, err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d sessions not as expected, first: %v", len(bad), bad[:min(5, len(bad))])
	}
	t.Logf("the whole test took %s", time.Since(began).Round(time.Millisecond))
}
