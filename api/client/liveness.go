package client

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// How fast a channel leaves a node that stopped answering.
//
// A node that dies closes its connections and the channel moves at once. A
// node that is frozen (SIGSTOP, a stalled host) keeps its TCP connections
// open and its health stream says SERVING for ever, and gRPC will not send a
// keepalive ping more often than every 10 s. So the channel probes every
// node it is connected to: a health Check every ProbeInterval that must
// answer within ProbeTimeout. A node that misses one has its connections
// closed: its subchannel leaves READY (a reconnect to a frozen process never
// completes its handshake), and the next call picks the node that now
// reports SERVING. A frozen node is thus left within ProbeInterval +
// ProbeTimeout (DetectTime).
const (
	ProbeInterval = 500 * time.Millisecond
	// ProbeTimeout is long enough for a live node on a busy machine: a
	// health Check is answered from memory, without Raft.
	ProbeTimeout = time.Second
	DetectTime   = ProbeInterval + ProbeTimeout
)

// keepaliveParams back the probes up where they do not run (a load
// balancer's address) and for half-open connections: gRPC's shortest ping
// interval with a short answer timeout. The server permits them
// (api/server's keepalive enforcement).
var keepaliveParams = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true}

// liveness tracks the connections a channel opened, by address, and
// closes those of a node that stops answering its probes.
type liveness struct {
	mu     sync.Mutex
	conns  map[string]map[*trackedConn]struct{}
	probes map[string]bool // addresses with a running prober
	// interval and timeout of the probes (ProbeInterval, ProbeTimeout).
	interval, timeout time.Duration
	// creds are the probes' transport credentials (the channel's).
	creds credentials.TransportCredentials
}

func newLiveness() *liveness {
	return &liveness{conns: map[string]map[*trackedConn]struct{}{}, probes: map[string]bool{},
		interval: ProbeInterval, timeout: ProbeTimeout, creds: insecure.NewCredentials()}
}

// dial is the channel's dialer: a TCP connection, tracked until it closes,
// and a prober for its address while any is open.
func (l *liveness) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l, addr: addr}
	l.mu.Lock()
	if l.conns[addr] == nil {
		l.conns[addr] = map[*trackedConn]struct{}{}
	}
	l.conns[addr][tc] = struct{}{}
	start := !l.probes[addr]
	if start {
		l.probes[addr] = true
	}
	l.mu.Unlock()
	if start {
		go l.probe(addr)
	}
	return tc, nil
}

// open reports whether the channel holds a connection to addr; when it
// holds none the prober of addr stops (and is started again by the next
// dial), so the probers end when the channel is closed.
func (l *liveness) open(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns[addr]) == 0 {
		delete(l.probes, addr)
		return false
	}
	return true
}

// drop closes every connection of the channel to addr.
func (l *liveness) drop(addr string) int {
	l.mu.Lock()
	var cs []*trackedConn
	for c := range l.conns[addr] {
		cs = append(cs, c)
	}
	l.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
	return len(cs)
}

// probe checks addr on a connection of its own while the channel holds a
// connection to it. A Check that times out means the node does not answer:
// the channel's connections to it are closed, and so is the probe's own (a
// load balancer's address then gets a fresh backend for both). A node that
// answers anything (even NOT_SERVING or an error) is alive, and its health
// stream tells the channel whether to use it.
func (l *liveness) probe(addr string) {
	var pc *grpc.ClientConn
	defer func() {
		if pc != nil {
			_ = pc.Close()
		}
	}()
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	for range tick.C {
		if !l.open(addr) {
			return
		}
		if pc == nil {
			var err error
			if pc, err = grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(l.creds)); err != nil {
				pc = nil
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		_, err := healthpb.NewHealthClient(pc).Check(ctx, &healthpb.HealthCheckRequest{Service: HealthService}, grpc.WaitForReady(true))
		cancel()
		if status.Code(err) == codes.DeadlineExceeded {
			l.drop(addr)
			_ = pc.Close()
			pc = nil
		}
	}
}

// trackedConn leaves the tracking when it is closed.
type trackedConn struct {
	net.Conn
	l    *liveness
	addr string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns[c.addr], c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
