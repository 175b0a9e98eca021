//go:build e2e

package chaos

import (
	"context"
	"net"
	"regexp"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// dialRecorder remembers the local address of every TCP connection a gRPC
// channel opens, so HAProxy's log lines of those connections can be found.
type dialRecorder struct {
	mu    sync.Mutex
	local []string
}

func (d *dialRecorder) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err == nil {
		d.mu.Lock()
		d.local = append(d.local, c.LocalAddr().String())
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialRecorder) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.local...)
}

// tcplogServer finds the tcplog line of the client connection from local
// ("127.0.0.1:PORT [date] dex dex_leader/SERVER ...") and returns SERVER.
func tcplogServer(log, local string) (string, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(local) + ` \[[^\]]*\] \S+ dex_leader/(\S+) `)
	m := re.FindStringSubmatch(log)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// The shipped config sends a connection opened right after the leader's
// SIGKILL to the new leader: the session it creates is created, and
// HAProxy's log shows no connection of that client relayed to the dead node.
func TestHAProxy_NewConnectionAfterLeaderKillGoesToTheNewLeader(t *testing.T) {
	needHAProxy(t)
	e := newEnv(t)
	h, err := harness.StartHAProxy(harness.HAProxyOptions{Dir: e.dir, Nodes: e.cluster.Nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- haproxy log tail:\n%s", harness.Tail(h.Log(), 30))
		}
		if err := h.Stop(); err != nil {
			t.Errorf("haproxy stop: %v", err)
		}
	})

	// HAProxy sends traffic to the leader before the kill.
	warm, err := client.Dial(h.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(warm).CreateSession(e.ctx(30*time.Second), &dexv1.CreateSessionRequest{SessionId: "before-kill", Message: "demo"}); err != nil {
		t.Fatalf("create through haproxy before the kill: %v", err)
	}
	warm.Close()

	dead := e.leader()
	dead.Kill()
	rec := &dialRecorder{}
	conn, err := client.Dial(h.Addr, grpc.WithContextDialer(rec.dial))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(conn).CreateSession(e.ctx(60*time.Second), &dexv1.CreateSessionRequest{SessionId: "after-kill", Message: "demo"}); err != nil {
		conn.Close()
		t.Fatalf("create through haproxy right after the leader's SIGKILL: %v", err)
	}
	local := rec.addrs()
	conn.Close() // HAProxy logs a connection when it ends
	if len(local) == 0 {
		t.Fatal("the client opened no connection")
	}

	next := e.leader()
	if next == dead {
		t.Fatalf("the killed node %s leads", dead.ID)
	}
	// The session exists on the new leader.
	direct, err := client.Dial(next.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := client.New(direct).GetSession(e.ctx(20*time.Second), "after-kill"); err != nil {
		t.Fatalf("the new leader %s does not know the session: %v", next.ID, err)
	}

	// The connection that created the session is the last one the client
	// opened: HAProxy relayed it to the new leader. No connection of the
	// client went to the dead node (one HAProxy found no server for, while
	// no node was ready yet, is logged <NOSRV>).
	carried := local[len(local)-1]
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := tcplogServer(h.Log(), carried); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy logged no line for the client connection from %s", carried)
		}
		time.Sleep(50 * time.Millisecond)
	}
	log := h.Log()
	for _, l := range local {
		srv, ok := tcplogServer(log, l)
		if !ok {
			continue // never logged: no data went through it (dontlognull)
		}
		if srv == dead.ID {
			t.Errorf("haproxy relayed the client connection from %s to the dead node %s", l, dead.ID)
		}
		if l == carried && srv != next.ID {
			t.Errorf("the connection that created the session went to %s, not to the new leader %s", srv, next.ID)
		}
	}
	t.Logf("the client opened %d connection(s) after the kill; the last went to %s (the dead node was %s)", len(local), next.ID, dead.ID)
}
