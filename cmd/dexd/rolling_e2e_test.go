//go:build e2e

package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// waitAllReady waits until every node answers /readyz 200 and exactly
// one, the leader dexctl names, answers /readyz/leader 200.
func waitAllReady(t *testing.T, c *testCluster, within time.Duration) {
	t.Helper()
	waitUntil(t, within, "every node's /readyz 200 and the leader's /readyz/leader 200 alone", func() (bool, string) {
		var seen []string
		leaders := 0
		all := true
		for i := range c.http {
			code, body := readyPath(c.http[i], "/readyz")
			lcode, _ := readyPath(c.http[i], "/readyz/leader")
			seen = append(seen, fmt.Sprintf("n%d /readyz %d %q /readyz/leader %d", i+1, code, body, lcode))
			all = all && code == http.StatusOK
			if lcode == http.StatusOK {
				leaders++
			}
		}
		return all && leaders == 1, strings.Join(seen, "; ")
	})
}

// Every healthy node is ready and serves every call: a session started
// through a follower alone runs its turn, and /readyz/leader names the
// leader alone.
func TestEveryHealthyNodeIsReadyAndServes(t *testing.T) {
	c := newTestCluster(t)
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	waitAllReady(t, c, 15*time.Second)
	startDemoWorker(t, c, t.TempDir())

	leader, _ := c.leaderIndex(t)
	if code, body := readyPath(c.http[leader], "/readyz/leader"); code != http.StatusOK {
		t.Fatalf("the leader n%d answers /readyz/leader %d %q", leader+1, code, body)
	}
	for i := range c.http {
		if i == leader {
			continue
		}
		code, body := readyPath(c.http[i], "/readyz/leader")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "not the leader") {
			t.Errorf("follower n%d answers /readyz/leader %d %q; want 503 naming the leader", i+1, code, body)
		}
	}
	follower := c.grpc[(leader+1)%3]
	id := startIn(t, follower, "--message", "hello through a follower")
	waitTurnDone(t, []string{follower}, id)
}

// The three nodes restarted one at a time, each after the one before is
// ready again (as a Kubernetes RollingUpdate of the StatefulSet does),
// while clients start sessions and send messages through every node and a
// Worker runs their turns: no call fails, and every turn finishes.
func TestRollingRestartUnderLoad(t *testing.T) {
	c := newTestCluster(t)
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	waitAllReady(t, c, 15*time.Second)
	startDemoWorker(t, c, t.TempDir())

	conn, err := client.Dial("dex:///" + strings.Join(c.grpc, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := client.New(conn)

	load := newRollingLoad(cl)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); load.run(ctx, w) }()
	}
	waitUntil(t, 30*time.Second, "turns before the first restart", func() (bool, string) {
		n := load.done.Load()
		return n >= 4, fmt.Sprintf("%d turns", n)
	})

	restartedLeader := false
	for _, i := range []int{2, 1, 0} {
		before := load.done.Load()
		leader, _ := c.leaderIndex(t)
		restartedLeader = restartedLeader || leader == i
		if err := c.procs[i].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, c.procs[i], 60*time.Second); code != 0 {
			t.Fatalf("n%d exited %d after SIGTERM:\n%s", i+1, code, c.procs[i].stderr.String())
		}
		for _, line := range strings.Split(c.procs[i].stderr.String(), "\n") {
			if strings.Contains(line, "drain") {
				t.Logf("n%d: %s", i+1, line)
			}
		}
		c.procs[i] = startDexd(t, c.args(i)...)
		waitUntil(t, 60*time.Second, fmt.Sprintf("n%d's /readyz 200 after its restart", i+1), func() (bool, string) {
			code, body := readyPath(c.http[i], "/readyz")
			return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
		})
		waitUntil(t, 30*time.Second, fmt.Sprintf("turns after n%d's restart", i+1), func() (bool, string) {
			n := load.done.Load()
			return n >= before+4, fmt.Sprintf("%d turns since", n-before)
		})
		t.Logf("n%d restarted (the leader: %v); %d turns so far", i+1, leader == i, load.done.Load())
	}
	if !restartedLeader {
		t.Fatal("the leadership moved ahead of the restarts: no restart stopped the leader")
	}
	stop()
	wg.Wait()
	waitAllReady(t, c, 15*time.Second)

	if errs := load.failures(); len(errs) > 0 {
		t.Fatalf("%d calls failed during the rolling restart (%d turns finished): %s", len(errs), load.done.Load(), strings.Join(errs, "; "))
	}
	t.Logf("%d turns, %d calls, none failed", load.done.Load(), load.calls.Load())
	// Every session the load finished holds its message once.
	for _, id := range load.sessions() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		g, err := cl.GetSession(ctx, id)
		cancel()
		if err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
		users := 0
		for _, h := range g.Session.History {
			if h.Kind == dexv1.HistoryKind_HISTORY_KIND_USER {
				users++
			}
		}
		if users != 1 {
			t.Errorf("session %s holds %d user messages; want 1", id, users)
		}
	}
}

// rollingLoad starts sessions with a first message and waits for each turn
// to end, counting every call and keeping every failure.
type rollingLoad struct {
	cl    *client.Client
	calls atomic.Int64
	done  atomic.Int64

	mu     sync.Mutex
	errs   []string
	ids    []string
	serial int
}

func newRollingLoad(cl *client.Client) *rollingLoad { return &rollingLoad{cl: cl} }

func (l *rollingLoad) run(ctx context.Context, worker int) {
	for ctx.Err() == nil {
		l.mu.Lock()
		l.serial++
		id := fmt.Sprintf("roll-%d-%d", worker, l.serial)
		l.mu.Unlock()
		if !l.turn(id) {
			return
		}
		l.mu.Lock()
		l.ids = append(l.ids, id)
		l.mu.Unlock()
	}
}

// turn creates session id with a message and waits for its turn to end;
// false after a failed call.
func (l *rollingLoad) turn(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	l.calls.Add(1)
	if _, err := l.cl.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: "hello " + id}); err != nil {
		l.fail("create %s: %v", id, err)
		return false
	}
	for {
		l.calls.Add(1)
		g, err := l.cl.GetSession(ctx, id)
		if err != nil {
			l.fail("get %s: %v", id, err)
			return false
		}
		if g.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE && len(g.Session.History) >= 2 {
			l.done.Add(1)
			return true
		}
		select {
		case <-ctx.Done():
			l.fail("session %s: its turn did not end within 45s (status %s)", id, g.Session.Status)
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (l *rollingLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

func (l *rollingLoad) failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

func (l *rollingLoad) sessions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}
