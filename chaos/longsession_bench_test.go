//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/chaos/soak"
)

// snapshotThreshold makes every node snapshot after this many entries (the
// default, 8,192, is more than 100 turns write), so both sessions restart
// from a snapshot with fewer than this many entries to replay after it.
const snapshotThreshold = 64

// BenchmarkLongSessionRestart times how fast a follower holding one long
// session restarts, at 100 and at 3,000 turns: a 3-node cluster with
// dexd's folding defaults (--keep-turn-steps 20) and a scripted Worker,
// the session driven as TestLongSession_TwoThousandTurnsKeepRunningUnderTheLimit
// drives it, a snapshot on every node after the last turn. Each iteration
// SIGKILLs a follower and restarts it on its data dir; the timer runs from
// the process start until the node has applied the leader's commit index
// (its /readyz turns 200 sooner, within 1,024 entries of it).
// serving-ms is the part until the node first answers on its HTTP address,
// which it serves once its state is loaded and raft started: the rest is
// the leader reaching it again, after the back-off raft's replication
// took while the node was down. Run it
// with a fixed count: -benchtime 5x.
//
// The last two cases keep 64 log entries after a snapshot instead of
// 10,240: a node reads back every entry of its log at start, and 3,000
// turns leave a full 10,240 where 100 turns leave a few hundred, so with
// the logs alike they tell the session's share of the restart (its
// snapshot) from the log's.
func BenchmarkLongSessionRestart(b *testing.B) {
	for _, c := range []struct {
		name  string
		turns int
		args  []string
	}{
		{"turns=100", 100, nil},
		{"turns=3000", 3000, nil},
		{"turns=100,trailing-logs=64", 100, []string{"--raft-trailing-logs", "64"}},
		{"turns=3000,trailing-logs=64", 3000, []string{"--raft-trailing-logs", "64"}},
	} {
		e, id := longSessionEnv(b, c.turns, c.args...)
		b.Run(c.name, func(b *testing.B) { restartFollower(b, e, id) })
		e.stop() // the next case runs on a machine without this cluster
	}
}

// longSessionEnv starts a cluster and drives one session to turns turns,
// folded through all but the last 20, with a snapshot on every node taken
// after the fold.
func longSessionEnv(b testing.TB, turns int, args ...string) (*env, string) {
	e := newEnv(b, append([]string{"--max-payload", fmt.Sprint(64 << 10),
		"--raft-snapshot-threshold", fmt.Sprint(snapshotThreshold), "--raft-snapshot-interval", "1s"}, args...)...)
	answer, _ := json.Marshal(strings.Repeat("a", 512))
	e.startWorker(`{"default":[{"text":` + string(answer) + `}]}`)
	id := driveTurns(e, turns, strings.Repeat("m", 512))
	r := e.get(id)
	for deadline := time.Now().Add(30 * time.Second); r.Session.FoldedThroughTurn < uint64(turns-20); r = e.get(id) {
		if time.Now().After(deadline) {
			b.Fatalf("the session folded its Steps through turn %d only; want %d", r.Session.FoldedThroughTurn, turns-20)
		}
		time.Sleep(200 * time.Millisecond)
	}
	commit := uint64(metricValue(e.leader(), "dex_raft_commit_index"))
	for _, n := range e.cluster.Nodes {
		waitSnapshotIndex(b, n, commit-snapshotThreshold, 30*time.Second)
	}
	return e, id
}

// driveTurns creates a session and sends msg until turns turns completed.
func driveTurns(e *env, turns int, msg string) string {
	id := e.createSession(msg)
	completed := make(chan struct{}, turns)
	ctx, stop := context.WithCancel(e.ctx(30 * time.Minute))
	defer stop()
	go e.client.WatchSession(ctx, id, 0, func(ev *dexv1.Event) error {
		if ev.Type == "turn_completed" {
			completed <- struct{}{}
		}
		return nil
	})
	for i := 1; i <= turns; i++ {
		select {
		case <-completed:
		case <-time.After(30 * time.Second):
			r := e.get(id)
			e.t.Fatalf("turn %d did not complete: session %s, last error %q", i, r.Session.Status, r.Session.LastError)
		}
		if i < turns {
			if _, err := e.client.SendMessage(e.ctx(20*time.Second), id, msg, fmt.Sprintf("k%d", i)); err != nil {
				e.t.Fatalf("message %d: %v", i, err)
			}
		}
	}
	return id
}

// waitSnapshotIndex waits until the node's newest snapshot covers index.
func waitSnapshotIndex(tb testing.TB, n *harness.Node, index uint64, d time.Duration) {
	tb.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		_, got, _, err := soak.RestoreNewest(n.DataDir)
		if err == nil && got >= index {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s has no snapshot at index %d or later within %s (newest %d, %v)", n.ID, index, d, got, err)
		}
	}
}

// restartFollower is one sub-benchmark: b.N restarts of a follower. With
// DEX_BENCH_DEXD_B set to another dexd, the restarts alternate between the
// built dexd (A) and that one (B) on the same data, A B B A, and the
// serving times of B are reported apart (B-serving-ms-median): a
// before/after pair of a start in one run.
func restartFollower(b *testing.B, e *env, id string) {
	var took, served, servedB []time.Duration
	var n *harness.Node
	var commit float64
	otherDexd := os.Getenv("DEX_BENCH_DEXD_B")
	b.StopTimer()
	for i := range b.N {
		leader, err := e.cluster.WaitReady(benchCtx(b, 30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		n = follower(b, e, leader)
		commit = metricValue(leader, "dex_raft_commit_index")
		n.Kill()
		asB := otherDexd != "" && (i%4 == 1 || i%4 == 2)
		n.Bin = filepath.Join(binDir, "dexd")
		if asB {
			n.Bin = otherDexd
		}

		b.StartTimer()
		start := time.Now()
		if err := n.Start(); err != nil {
			b.Fatal(err)
		}
		serving := time.Duration(0)
		for {
			applied := metricValue(n, "dex_raft_applied_index")
			if applied > 0 && serving == 0 {
				serving = time.Since(start)
			}
			if applied >= commit {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("%s applied %v of the leader's %v within a minute of its start:\n%s", n.ID, applied, commit, harness.Tail(n.Log(), 15))
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		if asB {
			servedB = append(servedB, serving)
			continue
		}
		took = append(took, time.Since(start))
		served = append(served, serving)
	}
	if len(servedB) > 0 {
		slices.Sort(servedB)
		b.ReportMetric(float64(servedB[len(servedB)/2].Microseconds())/1000, "B-serving-ms-median")
	}

	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "restart-ms-median")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "restart-ms-max")
	slices.Sort(served)
	b.ReportMetric(float64(served[len(served)/2].Microseconds())/1000, "serving-ms-median")
	size, index, restore, err := soak.RestoreNewest(n.DataDir)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size), "snapshot-bytes")
	b.ReportMetric(commit-float64(index), "entries-after-snapshot")
	b.ReportMetric(float64(restore.Microseconds())/1000, "offline-restore-ms")
	b.ReportMetric(metricValue(n, `dex_state_rows{table="steps"}`), "steps-held")
	r, err := e.client.GetSession(benchCtx(b, 20*time.Second), id)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(r.Session.TurnsCompleted), "turns")
	b.ReportMetric(float64(len(r.FoldedTurns)), "folded-turns")
}

// follower is a running node other than the leader.
func follower(b *testing.B, e *env, leader *harness.Node) *harness.Node {
	for _, n := range e.cluster.Nodes {
		if n != leader && n.Running() {
			return n
		}
	}
	b.Fatal("no running follower")
	return nil
}

func benchCtx(b *testing.B, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	b.Cleanup(cancel)
	return ctx
}
