package client

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lines is a goroutine-safe stderr.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitCount waits (bounded) until s holds want at least n times.
func waitCount(t *testing.T, s func() string, want string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for strings.Count(s(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q not seen %d times within %s; got:\n%s", want, n, within, s())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startSayingWorker runs a Worker with no Logger on target, its stderr
// captured, until the test ends; stop ends Run and returns its error.
func startSayingWorker(t *testing.T, target string, opts WorkerOptions) (out *lines, stop func() error) {
	t.Helper()
	conn, err := Dial(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	opts.ID = "w1"
	opts.Tools = []Tool{writeTool("save_note", func(context.Context, ToolCall) (ToolResult, error) { return ToolResult{}, nil })}
	opts.PollWait = 100 * time.Millisecond
	w, err := NewWorker(conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	out = &lines{}
	if w.stderr != nil {
		w.stderr = out
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return out, stop
}

func TestWorkerWithNoLoggerSaysWhyItCannotRegisterAndRepeatsIt(t *testing.T) {
	addr := closedAddr(t)
	out, _ := startSayingWorker(t, addr, WorkerOptions{})
	want := "dex worker w1: cannot register with " + addr + ": connection refused; retrying"
	// The first line within a few seconds, then again after a gap.
	waitCount(t, out.String, want, 1, 10*time.Second)
	waitCount(t, out.String, want, 2, 20*time.Second)
	t.Logf("stderr:\n%s", out)
	if n := strings.Count(out.String(), "\n"); n > 4 {
		t.Fatalf("%d lines within a few seconds; want them spaced out:\n%s", n, out)
	}
}

func TestWorkerSaysWhichLeaderItRegisteredWithAndDeregistersOnStop(t *testing.T) {
	f := newFakeWorkers()
	nodes := startWorkerNodes(t, f, 2)
	out, stop := startSayingWorker(t, target(nodes), WorkerOptions{})
	waitCount(t, out.String, "dex worker w1: registered with leader A at "+nodes[0].addr+"\n", 1, 10*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := append([]string(nil), f.deregistered...)
	f.mu.Unlock()
	if len(got) != 1 || got[0] != "w1" {
		t.Fatalf("deregistered %v; want w1 once, as it stopped", got)
	}
	if !strings.HasSuffix(out.String(), "dex worker w1: deregistered\n") {
		t.Fatalf("stderr:\n%s\nwant it to end with the deregistration", out)
	}
}

func TestWorkerSaysWhenItCannotDeregister(t *testing.T) {
	f := newFakeWorkers()
	f.deregisterErr = status.Error(codes.Unavailable, "no leader is known yet")
	nodes := startWorkerNodes(t, f, 1)
	out, stop := startSayingWorker(t, target(nodes), WorkerOptions{CallTimeout: time.Second})
	waitCount(t, out.String, "registered with leader A", 1, 10*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := "dex worker w1: could not deregister from " + nodes[0].addr + ": no leader is known yet; the cluster drops the Worker after its TTL"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("stderr:\n%s\nwant %q", out, want)
	}

	// A cluster without the call: nothing to say.
	f2 := newFakeWorkers()
	f2.deregisterErr = status.Error(codes.Unimplemented, "unknown method")
	out2, stop2 := startSayingWorker(t, target(startWorkerNodes(t, f2, 1)), WorkerOptions{})
	waitCount(t, out2.String, "registered with leader A", 1, 10*time.Second)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out2.String(), "deregister") {
		t.Fatalf("stderr:\n%s\nwant nothing about deregistering", out2)
	}
}

func TestWorkerSaysWhyTheClusterRefusedItsRegistration(t *testing.T) {
	f := newFakeWorkers()
	f.registerErr = status.Error(codes.InvalidArgument, "tool save_note has another policy")
	nodes := startWorkerNodes(t, f, 1)
	out, stop := startSayingWorker(t, target(nodes), WorkerOptions{})
	waitCount(t, out.String, "dex worker w1: register worker w1 with "+nodes[0].addr+": rpc error: code = InvalidArgument desc = tool save_note has another policy", 1, 10*time.Second)
	if err := stop(); err == nil || !strings.Contains(err.Error(), "another policy") {
		t.Fatalf("Run: %v; want the refusal", err)
	}
	if strings.Contains(out.String(), "deregister") {
		t.Fatalf("stderr:\n%s\nan unregistered Worker has nothing to deregister", out)
	}
}

func TestWorkerWithALoggerLogsTheLinesThereNotOnStderr(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	addr := closedAddr(t)
	out, _ := startSayingWorker(t, addr, WorkerOptions{Logger: zap.New(core)})
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessageSnippet("cannot register with "+addr+": connection refused").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no line in the log: %v", logs.All())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out.String() != "" {
		t.Fatalf("stderr %q; want nothing with a Logger", out)
	}
}

func TestSayEverySpacesLinesOutUpToItsCap(t *testing.T) {
	var s sayEvery
	now := time.Unix(0, 0)
	var gaps []time.Duration
	last := now
	for i := 0; i < 10*60; i++ { // ten minutes, a second at a time
		if s.due(now) {
			gaps = append(gaps, now.Sub(last))
			last = now
		}
		now = now.Add(time.Second)
	}
	want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}
	for i, g := range want {
		if gaps[i] != g {
			t.Fatalf("gaps %v; want them to start %v", gaps, want)
		}
	}
	for _, g := range gaps[len(want):] {
		if g != 30*time.Second {
			t.Fatalf("gaps %v; want 30s at most", gaps)
		}
	}
}
