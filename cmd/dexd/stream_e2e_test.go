//go:build e2e

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// liveText is what a watch delivered of each attempt's live output, with
// every delta checked to start where the one before it ended.
type liveText struct {
	mu     sync.Mutex
	text   map[string]*strings.Builder // by "step#attempt"
	ended  map[string]string           // "output_ended" or "output_abandoned"
	errors []string
}

func newLiveText() *liveText {
	return &liveText{text: map[string]*strings.Builder{}, ended: map[string]string{}}
}

func (l *liveText) add(e *dexv1.Event) {
	if e.Output == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := fmt.Sprintf("%s#%d", e.StepId, e.Output.Attempt)
	b := l.text[k]
	if b == nil {
		b = &strings.Builder{}
		l.text[k] = b
	}
	if e.Type != "output" {
		l.ended[k] = e.Type
		return
	}
	if e.Output.Offset != uint64(b.Len()) {
		l.errors = append(l.errors, fmt.Sprintf("%s: a delta at offset %d after %d bytes (a gap or a repeat)", k, e.Output.Offset, b.Len()))
	}
	b.WriteString(e.Output.Text)
}

func (l *liveText) of(k string) (string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.text[k]; b != nil {
		return b.String(), l.ended[k]
	}
	return "", l.ended[k]
}

// watchLive watches a session's events with its live output into a
// liveText; stop ends the watch and waits for it.
func watchLive(ctx context.Context, cl *client.Client, id string) (live *liveText, stop func()) {
	live = newLiveText()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cl.WatchSession(ctx, id, 0, func(e *dexv1.Event) error { live.add(e); return nil }, client.WithLiveOutput())
	}()
	return live, func() { cancel(); <-done }
}

// numberedText is n words that never repeat, so a gap or a repeat shows.
func numberedText(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%04d ", i)
	}
	return b.String()
}

// With real processes: a Worker streams a model's output while a client
// watches it live; the leader is SIGKILLed in the middle of the stream. The
// watcher's text equals the committed output, each byte delivered once and
// in order, and it is told the committed result replaced the stream.
func TestLiveOutputSurvivesALeaderKill(t *testing.T) {
	c := newTestCluster(t)
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	dir := t.TempDir()
	want := numberedText(400) // 2,400 bytes: 3 s of streaming at 8 bytes every 10 ms
	script := map[string]any{"turns": []any{map[string]any{"match": "stream", "outputs": []any{map[string]any{"text": want}}}}}
	path := writeScript(t, dir, script)
	runDexworker(t, c, dir, "--ledger", filepath.Join(dir, "ledger.jsonl"), "--script", path, "--stream", "--poll-wait", "2s")

	conn, err := client.Dial("dex:///" + strings.Join(c.grpc, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := client.New(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	created, err := dexv1.NewSessionServiceClient(conn).CreateSession(ctx, &dexv1.CreateSessionRequest{Message: "stream"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Session.Id
	step := id + "-s1"
	live, stopWatch := watchLive(ctx, cl, id)

	waitUntil(t, 20*time.Second, "a quarter of the output streamed", func() (bool, string) {
		got, _ := live.of(step + "#1")
		return len(got) >= len(want)/4, fmt.Sprintf("%d bytes", len(got))
	})
	leader, _ := c.leaderIndex(t)
	c.procs[leader].kill()
	waitTurnDone(t, c.others(leader), id)
	waitUntil(t, 20*time.Second, "the watcher told the output is whole", func() (bool, string) {
		got, end := live.of(step + "#1")
		return end == "output_ended", fmt.Sprintf("%d bytes, end %q", len(got), end)
	})
	stopWatch()

	got, _ := live.of(step + "#1")
	for _, e := range live.errors {
		t.Error(e)
	}
	if got != want {
		t.Fatalf("the watcher saw %d bytes; want the %d of the output (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	r, err := cl.GetSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var committed string
	for _, h := range r.Session.History {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_ASSISTANT {
			committed = h.Text
		}
	}
	if committed != got {
		t.Fatalf("the committed output (%d bytes) is not what was streamed (%d bytes)", len(committed), len(got))
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// startKillableDexworker starts a dexworker and returns its process, for a
// test that SIGKILLs it; the cleanup stops it if it still runs.
func startKillableDexworker(t *testing.T, c *testCluster, dir, name string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dexworkerBin, append([]string{"--addr", "dex:///" + strings.Join(c.grpc, ","), "--id", name}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd
}

// With real processes: the Worker is SIGKILLed in the middle of a stream.
// The watcher is told the partial output was abandoned; the retry, on
// another Worker, streams afresh from offset 0 of a new attempt, and that
// attempt's text is the committed output.
func TestLiveOutputOfAKilledWorkerIsAbandoned(t *testing.T) {
	c := newTestCluster(t)
	c.extra = []string{"--heartbeat-timeout", "2s", "--heartbeat-interval", "500ms"}
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	dir := t.TempDir()
	want := numberedText(300)
	script := map[string]any{"turns": []any{map[string]any{"match": "stream", "outputs": []any{map[string]any{"text": want, "always": true}}}}}
	path := writeScript(t, dir, script)
	workerArgs := []string{"--ledger", filepath.Join(dir, "ledger.jsonl"), "--script", path, "--stream", "--poll-wait", "2s"}
	first := startKillableDexworker(t, c, dir, "w1", workerArgs...)

	conn, err := client.Dial("dex:///" + strings.Join(c.grpc, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := client.New(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	created, err := dexv1.NewSessionServiceClient(conn).CreateSession(ctx, &dexv1.CreateSessionRequest{Message: "stream"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Session.Id
	step := id + "-s1"
	live, stopWatch := watchLive(ctx, cl, id)
	waitUntil(t, 20*time.Second, "a third of attempt 1's output streamed", func() (bool, string) {
		got, _ := live.of(step + "#1")
		return len(got) >= len(want)/3, fmt.Sprintf("%d bytes", len(got))
	})
	syscall.Kill(first.Process.Pid, syscall.SIGKILL)
	startKillableDexworker(t, c, dir, "w2", workerArgs...)
	waitTurnDone(t, c.grpc, id)
	waitUntil(t, 20*time.Second, "attempt 2's output whole", func() (bool, string) {
		_, end := live.of(step + "#2")
		return end == "output_ended", end
	})
	stopWatch()
	for _, e := range live.errors {
		t.Error(e)
	}
	partial, end1 := live.of(step + "#1")
	if end1 != "output_abandoned" || len(partial) == 0 || len(partial) >= len(want) {
		t.Fatalf("attempt 1: %d bytes, end %q; want a partial output marked abandoned", len(partial), end1)
	}
	if got, _ := live.of(step + "#2"); got != want {
		t.Fatalf("attempt 2 streamed %d bytes; want the whole %d from offset 0", len(got), len(want))
	}
}

// With real processes, three partitions: the watcher's connection reaches
// one node only, one that does not lead the session's partition, and that
// partition's leader is SIGKILLed in the middle of the stream. The node
// relays the leader's live output, then the next leader's after the watch
// resumes: the watcher's text is the committed output, each byte once.
func TestLiveOutputThroughAFollowerSurvivesItsLeadersKill(t *testing.T) {
	c := newTestCluster(t)
	c.extra = []string{"--partitions", fmt.Sprint(testPartitions)}
	c.startAll(t)
	waitPartitionsServed(t, c)
	waitLeadersSpread(t, c)
	dir := t.TempDir()
	want := numberedText(400)
	script := map[string]any{"turns": []any{map[string]any{"match": "stream", "outputs": []any{map[string]any{"text": want}}}}}
	path := writeScript(t, dir, script)
	runDexworker(t, c, dir, "--ledger", filepath.Join(dir, "ledger.jsonl"), "--script", path, "--stream", "--poll-wait", "2s")

	parts, err := partitionLeaders(c.grpc[0])
	if err != nil {
		t.Fatal(err)
	}
	id := "live-through-a-follower"
	k := wirerules.PartitionOf(id, testPartitions)
	leader, follower := -1, -1
	for i := range c.procs {
		if parts[k].Leader == fmt.Sprintf("n%d", i+1) {
			leader = i
		} else if follower < 0 {
			follower = i
		}
	}
	if leader < 0 || follower < 0 {
		t.Fatalf("partition %d's leader %q among %d nodes", k, parts[k].Leader, len(c.procs))
	}
	conn, err := client.Dial("dex:///" + c.grpc[follower])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := client.New(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := dexv1.NewSessionServiceClient(conn).CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: "stream"}); err != nil {
		t.Fatal(err)
	}
	step := id + "-s1"
	live, stopWatch := watchLive(ctx, cl, id)
	waitUntil(t, 20*time.Second, "a quarter of the output streamed", func() (bool, string) {
		got, _ := live.of(step + "#1")
		return len(got) >= len(want)/4, fmt.Sprintf("%d bytes", len(got))
	})
	c.procs[leader].kill()
	waitTurnDone(t, []string{c.grpc[follower]}, id)
	waitUntil(t, 20*time.Second, "the watcher told the output is whole", func() (bool, string) {
		got, end := live.of(step + "#1")
		return end == "output_ended", fmt.Sprintf("%d bytes, end %q", len(got), end)
	})
	stopWatch()
	for _, e := range live.errors {
		t.Error(e)
	}
	if got, _ := live.of(step + "#1"); got != want {
		t.Fatalf("the watcher saw %d bytes through n%d; want the %d of the output (first difference at %d)", len(got), follower+1, len(want), firstDiff(got, want))
	}
}
