package peer

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/dexhq/dex/api/tlsconf"
)

// Listener is a node's one raft listener. Each connection's handshake
// names the cluster and the raft group (the partition) it is for; the
// listener checks the cluster, then hands the connection to that group's
// stream layer (Group). A group the node does not hold is refused.
type Listener struct {
	ln        net.Listener
	advertise net.Addr
	ident     *ClusterIdentity
	log       *zap.Logger
	tls       *tlsconf.Store // nil: plain TCP

	mu     sync.Mutex
	groups map[uint16]*handshakeLayer
	// noGroupLogAt rate-limits the log line of a refused group per address:
	// a peer with another --partitions redials every few milliseconds.
	noGroupLogAt map[string]time.Time

	closed    chan struct{}
	closeOnce sync.Once
}

// Listen opens a node's raft listener on bind, advertising advertise (the
// listener's own address when nil), guarded by ident's handshake and, when
// peerTLS is set, mutual TLS.
func Listen(bind string, advertise net.Addr, ident *ClusterIdentity, log *zap.Logger, peerTLS *tlsconf.Store) (*Listener, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return newListener(ln, advertise, ident, log, peerTLS), nil
}

func newListener(ln net.Listener, advertise net.Addr, ident *ClusterIdentity, log *zap.Logger, peerTLS *tlsconf.Store) *Listener {
	if peerTLS != nil {
		// Mutual TLS under the cluster handshake: a process without a node
		// certificate of the cluster's CA never gets to send a frame.
		ln = tls.NewListener(ln, peerTLS.PeerServerConfig())
	}
	if log == nil {
		log = zap.NewNop()
	}
	l := &Listener{ln: ln, advertise: advertise, ident: ident, log: log, tls: peerTLS,
		groups: map[uint16]*handshakeLayer{}, noGroupLogAt: map[string]time.Time{}, closed: make(chan struct{})}
	go l.acceptLoop()
	return l
}

// Group is the stream layer of raft group g: the connections whose
// handshake names g, and dials that name it. Closing it refuses g's
// connections from then on; the listener stays open.
func (l *Listener) Group(g uint16) (raft.StreamLayer, error) {
	return l.group(g, false)
}

// owningGroup is group g's layer that also closes the listener when it is
// closed: the one group of a transport that owns its listener.
func (l *Listener) owningGroup(g uint16) *handshakeLayer {
	layer, err := l.group(g, true)
	if err != nil {
		panic(err) // a fresh listener holds no group yet
	}
	return layer
}

func (l *Listener) group(g uint16, owns bool) (*handshakeLayer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.groups[g]; ok {
		return nil, fmt.Errorf("raft group %d already has a stream layer on this listener", g)
	}
	layer := &handshakeLayer{listener: l, group: g, owns: owns, accepted: make(chan net.Conn), closed: make(chan struct{})}
	l.groups[g] = layer
	return layer, nil
}

func (l *Listener) layer(g uint16) *handshakeLayer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.groups[g]
}

func (l *Listener) drop(layer *handshakeLayer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.groups[layer.group] == layer {
		delete(l.groups, layer.group)
	}
}

// Close stops accepting connections for every group.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.closed)
		err = l.ln.Close()
	})
	return err
}

// Addr is the address peers dial.
func (l *Listener) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.ln.Addr()
}

// acceptLoop handshakes each connection in its own goroutine, so a slow or
// silent client never holds up the others.
func (l *Listener) acceptLoop() {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.Close()
			return
		}
		go l.serveHandshake(conn)
	}
}

func (l *Listener) serveHandshake(conn net.Conn) {
	addr := conn.RemoteAddr().String()
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReaderSize(conn, 512)
	kind, group, remote, err := readFrame(br)
	if err != nil {
		l.log.Warn("raft connection without a valid handshake closed", zap.String("from", addr), zap.Error(err))
		conn.Close()
		return
	}
	if kind == kindProbe {
		reply := replyOK
		if l.ident.welcome(remote) { // a probe names the asking node
			reply = replyWelcome
		}
		_ = writeFrame(conn, reply, 0, l.ident.ID())
		conn.Close()
		return
	}
	if err := l.ident.Accept(remote, addr, "accepted from"); err != nil {
		_ = writeFrame(conn, replyRefused, 0, l.ident.ID())
		conn.Close()
		return
	}
	layer := l.layer(group)
	if layer == nil {
		l.refuseGroup(conn, addr, group)
		return
	}
	if err := writeFrame(conn, replyOK, 0, l.ident.ID()); err != nil {
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	c := net.Conn(conn)
	if br.Buffered() > 0 {
		c = &bufferedConn{Conn: conn, r: br}
	}
	select {
	case layer.accepted <- c:
	case <-layer.closed:
		conn.Close()
	case <-l.closed:
		conn.Close()
	}
}

func (l *Listener) refuseGroup(conn net.Conn, addr string, group uint16) {
	_ = writeFrame(conn, replyNoGroup, 0, l.ident.ID())
	conn.Close()
	l.mu.Lock()
	quiet := time.Since(l.noGroupLogAt[addr]) < 10*time.Second
	if !quiet {
		l.noGroupLogAt[addr] = time.Now()
	}
	l.mu.Unlock()
	if !quiet {
		l.log.Error("refused a raft connection for a partition this node does not hold (do both nodes run with the same --partitions?)",
			zap.String("from", addr), zap.Uint16("partition", group))
	}
}

// bufferedConn replays what the handshake reader read ahead.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// handshakeLayer is the raft.StreamLayer of one raft group on a Listener.
type handshakeLayer struct {
	listener  *Listener
	group     uint16
	owns      bool // closing the layer closes the listener
	accepted  chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

var _ raft.StreamLayer = (*handshakeLayer)(nil)

// Accept returns the next connection for this group whose handshake
// passed.
func (l *handshakeLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.listener.closed:
		return nil, net.ErrClosed
	}
}

func (l *handshakeLayer) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.closed)
		l.listener.drop(l)
		if l.owns {
			err = l.listener.Close()
		}
	})
	return err
}

func (l *handshakeLayer) Addr() net.Addr { return l.listener.Addr() }
