package client

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/lease"
)

// freezer is a TCP proxy in front of a node that can freeze: it then
// forwards nothing either way and keeps every connection open, as a node
// under SIGSTOP looks to its peers (the kernel still accepts connections).
type freezer struct {
	lis    net.Listener
	to     string
	frozen atomic.Bool

	mu     sync.Mutex
	conns  []net.Conn
	closed bool // by the test's cleanup
}

func startFreezer(t *testing.T, to string) *freezer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{lis: lis, to: to}
	go f.accept()
	t.Cleanup(func() {
		_ = lis.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.closed = true
		for _, c := range f.conns {
			_ = c.Close()
		}
	})
	return f
}

func (f *freezer) addr() string { return f.lis.Addr().String() }

func (f *freezer) accept() {
	for {
		in, err := f.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", f.to)
		if err != nil {
			_ = in.Close()
			continue
		}
		f.mu.Lock()
		if f.closed {
			// Accepted as the test ended: left open, the node's server
			// would wait out its 2-minute handshake timeout on it when
			// the test stops it.
			f.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		f.conns = append(f.conns, in, out)
		f.mu.Unlock()
		go f.pipe(in, out)
		go f.pipe(out, in)
	}
}

func (f *freezer) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for f.frozen.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = src.Close()
			}
			return
		}
	}
}

// startWorkerOn runs a Worker on target until the test ends.
func startWorkerOn(t *testing.T, target string, opts WorkerOptions) {
	t.Helper()
	conn, err := Dial(target)
	if err != nil {
		t.Fatal(err)
	}
	opts.ID = "w1"
	opts.ShutdownGrace = time.Second
	w, err := NewWorker(conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		_ = conn.Close()
	})
}

// The leader freezes while a tool runs: the Complete first goes to the
// frozen node, is given up after one short try and reaches the new lease
// holder well inside the grace the new leader gives the attempt.
func TestWorkerCompleteLeavesAFrozenLeaderWithinTheGrace(t *testing.T) {
	task := toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
	f := newFakeWorkers(task)
	nodes := startWorkerNodes(t, f, 2)
	fa := startFreezer(t, nodes[0].addr)
	release, started := make(chan struct{}), make(chan struct{}, 1)
	var runs atomic.Int32
	startWorkerOn(t, "dex:///"+fa.addr()+","+nodes[1].addr, WorkerOptions{PollWait: 100 * time.Millisecond,
		Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
			runs.Add(1)
			started <- struct{}{}
			select {
			case <-release:
				return ToolResult{Content: "saved"}, nil
			case <-ctx.Done():
				return ToolResult{}, ctx.Err()
			}
		})}})
	select {
	case <-started: // the claim on A went through
	case <-time.After(10 * time.Second):
		t.Fatal("the tool never started")
	}

	fa.frozen.Store(true)
	nodes[0].setServing(false) // unseen by the Worker: A is frozen
	nodes[1].setServing(true)
	finished := time.Now()
	close(release)
	f.waitFor(t, "complete on B", func() bool { return slices.Contains(f.log, "complete 2@B") })
	took := time.Since(finished)
	grace := lease.TakeoverGrace(time.Duration(task.HeartbeatIntervalMs)*time.Millisecond, time.Duration(task.HeartbeatTimeoutMs)*time.Millisecond)
	if took >= grace {
		t.Fatalf("the Complete reached the new leader %s after the tool finished; the new leader's grace is %s", took, grace)
	}
	log, claims, _, fails := f.snapshot()
	if claims != 1 || fails != 0 || runs.Load() != 1 {
		t.Fatalf("claims %d fails %d runs %d; log %v", claims, fails, runs.Load(), log)
	}
	t.Logf("the Complete reached B %s after the tool finished (grace %s)", took.Round(time.Millisecond), grace)
}

// A Worker long-polls a node that freezes: the poll does not wait out its
// 20 s on it; the Worker takes its next task from the new lease holder.
func TestWorkerPollLeavesAFrozenLeader(t *testing.T) {
	f := newFakeWorkers()
	nodes := startWorkerNodes(t, f, 2)
	fa := startFreezer(t, nodes[0].addr)
	startWorkerOn(t, "dex:///"+fa.addr()+","+nodes[1].addr, WorkerOptions{PollWait: 20 * time.Second,
		Tools: []Tool{writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
			return ToolResult{Content: "saved"}, nil
		})}})
	f.waitFor(t, "registered on A", func() bool { return f.registered == 1 })
	time.Sleep(200 * time.Millisecond) // the first long poll is open on A

	fa.frozen.Store(true)
	nodes[0].setServing(false)
	nodes[1].setServing(true)
	frozen := time.Now()
	f.mu.Lock()
	f.tasks = append(f.tasks, toolTask("st1", "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE))
	f.mu.Unlock()
	f.waitFor(t, "complete on B", func() bool { return slices.Contains(f.log, "complete 2@B") })
	if took := time.Since(frozen); took >= 10*time.Second {
		t.Fatalf("the task on B was done %s after A froze; the poll waited on the frozen node", took)
	}
}

// A client's read sent to a node that froze is not stuck there until its
// caller gives up or a keepalive fails: the channel drops the frozen node and the read is
// answered by the node that serves now.
func TestClientLeavesAFrozenNode(t *testing.T) {
	nodes, _ := startSessionNodes(t, 2)
	fa := startFreezer(t, nodes[0].addr)
	conn, err := Dial("dex:///" + fa.addr() + "," + nodes[1].addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := New(conn)
	// Well under gRPC's keepalive (a ping after 10 s of silence), which
	// alone would get a read off A only after 10-12 s.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if r, err := c.GetSession(ctx, "s"); err != nil || r.Session.Id != "s@A" {
		t.Fatalf("before the freeze: %v, %v; want s@A", r, err)
	}
	fa.frozen.Store(true)
	nodes[0].setServing(false)
	nodes[1].setServing(true)
	frozen := time.Now()
	for i := range 10 { // round robin would send every other read to A
		r, err := c.GetSession(ctx, "s")
		if err != nil {
			t.Fatalf("read %d after the freeze: %v", i+1, err)
		}
		if r.Session.Id != "s@B" {
			t.Fatalf("read %d answered by %s; want B", i+1, r.Session.Id)
		}
	}
	t.Logf("10 reads answered by B %s after A froze", time.Since(frozen).Round(time.Millisecond))
}
