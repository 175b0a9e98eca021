package peer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/dexhq/dex/api/tlsconf"
)

// Every raft connection opens with a handshake that names the cluster of
// each side, so a node of another cluster (an old data dir, a copied
// config) is refused before raft reads a byte from it. It also names the
// raft group (the partition) the connection is for: one listener serves
// every group of a node (listener.go).
//
//	dialer → header: magic, kind, len, cluster id            (group 0)
//	                 magic2, kind, group (2 bytes), len, id  (group > 0)
//	         reply:  magic, status, len, cluster id
//
// Group 0 keeps the first form, so a cluster of one partition speaks
// exactly as before partitions. An empty id means "not known yet" (a node
// that bootstrapped and whose first leader has not made the id yet, or a
// data dir from before ids).
const (
	handshakeMagic      = "DEXRAFT1"
	groupHandshakeMagic = "DEXRAFT2"
	handshakeTimeout    = 3 * time.Second

	kindRaft  byte = 'R' // a raft connection follows
	kindProbe byte = 'P' // only asks the cluster id (naming the asking node), then closes

	replyOK      byte = 'K'
	replyRefused byte = 'X'
	// replyWelcome answers a probe from a node the cluster's configuration
	// names but that never held the cluster's data (a founding member that
	// starts late): it may take the log from the leader instead of
	// bootstrapping.
	replyWelcome byte = 'W'
	// replyNoGroup refuses a connection for a raft group this node does
	// not hold.
	replyNoGroup byte = 'N'
)

// NoGroupError is a raft connection refused because the other node holds
// no such group.
type NoGroupError struct {
	Addr  string
	Group uint16
}

func (e *NoGroupError) Error() string {
	return fmt.Sprintf("refused a raft connection for partition %d with %s: that node holds no partition %d (do both nodes run with the same --partitions?)", e.Group, e.Addr, e.Group)
}

// ForeignClusterError is a connection refused because the other side
// belongs to another cluster.
type ForeignClusterError struct {
	Local, Remote, Addr string
}

func (e *ForeignClusterError) Error() string {
	return fmt.Sprintf("refused a raft connection with %s: it belongs to cluster %s, this node to cluster %s (a node of another cluster: wipe its data dir and --join it, or fix --peers)", e.Addr, e.Remote, e.Local)
}

// ClusterIdentity is this node's cluster id, shared by the transport, the
// join and the leader. A node that does not know it yet adopts the first
// one it hears (from a peer, a Join answer or the replicated state).
type ClusterIdentity struct {
	mu      sync.Mutex
	id      string
	persist func(id string) error
	log     *zap.Logger
	foreign atomic.Uint64

	logMu     sync.Mutex
	lastLogAt map[string]time.Time

	// welcomes reports whether a probing node is a member that never held
	// the cluster's data (nil until the node's raft is up).
	welcomes atomic.Pointer[func(nodeID string) bool]
}

func (c *ClusterIdentity) SetWelcome(f func(nodeID string) bool) { c.welcomes.Store(&f) }

func (c *ClusterIdentity) welcome(nodeID string) bool {
	f := c.welcomes.Load()
	return nodeID != "" && f != nil && (*f)(nodeID)
}

// NewClusterIdentity is a node's cluster identity knowing id ("" while it
// does not); persist, when set, records an id the node learns.
func NewClusterIdentity(id string, persist func(string) error, log *zap.Logger) *ClusterIdentity {
	if log == nil {
		log = zap.NewNop()
	}
	return &ClusterIdentity{id: id, persist: persist, log: log, lastLogAt: map[string]time.Time{}}
}

// ID is the cluster id, empty while unknown.
func (c *ClusterIdentity) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// Accept checks a peer's cluster id: equal ids and an unknown id on either
// side pass; an unknown local id adopts the peer's. A different id is
// refused, logged (at most every 10 s per address) and counted.
func (c *ClusterIdentity) Accept(remote, addr, how string) error {
	c.mu.Lock()
	local := c.id
	switch {
	case remote == "" || remote == local:
		c.mu.Unlock()
		return nil
	case local == "":
		c.id = remote
		c.mu.Unlock()
		c.log.Info("cluster id adopted", zap.String("cluster", remote), zap.String("from", how+" "+addr))
		if c.persist != nil {
			if err := c.persist(remote); err != nil {
				c.log.Error("recording the cluster id failed", zap.Error(err))
			}
		}
		return nil
	}
	c.mu.Unlock()
	err := &ForeignClusterError{Local: local, Remote: remote, Addr: addr}
	c.refused(err, how)
	return err
}

func (c *ClusterIdentity) refused(err *ForeignClusterError, how string) {
	c.foreign.Add(1)
	c.logMu.Lock()
	last := c.lastLogAt[err.Addr]
	quiet := time.Since(last) < 10*time.Second
	if !quiet {
		c.lastLogAt[err.Addr] = time.Now()
	}
	c.logMu.Unlock()
	if !quiet {
		c.log.Error("foreign cluster: "+err.Error(), zap.String("direction", how), zap.String("remote_cluster", err.Remote), zap.String("cluster", err.Local))
	}
}

// ForeignConnections counts the raft connections refused (in either
// direction) because the other side belongs to another cluster.
func (c *ClusterIdentity) ForeignConnections() uint64 { return c.foreign.Load() }

// writeFrame writes a handshake frame for group (a reply is always group 0's
// form).
func writeFrame(w io.Writer, b byte, group uint16, id string) error {
	if len(id) > 255 {
		return fmt.Errorf("cluster id too long")
	}
	buf := make([]byte, 0, len(groupHandshakeMagic)+4+len(id))
	if group == 0 {
		buf = append(buf, handshakeMagic...)
		buf = append(buf, b)
	} else {
		buf = append(buf, groupHandshakeMagic...)
		buf = append(buf, b, byte(group>>8), byte(group))
	}
	buf = append(buf, byte(len(id)))
	buf = append(buf, id...)
	_, err := w.Write(buf)
	return err
}

func readFrame(r io.Reader) (b byte, group uint16, id string, err error) {
	head := make([]byte, len(handshakeMagic)+1)
	if _, err := io.ReadFull(r, head); err != nil {
		return 0, 0, "", err
	}
	b = head[len(handshakeMagic)]
	switch string(head[:len(handshakeMagic)]) {
	case handshakeMagic:
	case groupHandshakeMagic:
		g := make([]byte, 2)
		if _, err := io.ReadFull(r, g); err != nil {
			return 0, 0, "", err
		}
		group = uint16(g[0])<<8 | uint16(g[1])
	default:
		return 0, 0, "", errors.New("not a Dex raft handshake (a dexd from before cluster ids, or another program)")
	}
	n := make([]byte, 1)
	if _, err := io.ReadFull(r, n); err != nil {
		return 0, 0, "", err
	}
	idb := make([]byte, n[0])
	if _, err := io.ReadFull(r, idb); err != nil {
		return 0, 0, "", err
	}
	return b, group, string(idb), nil
}

// Dial opens a raft connection and exchanges cluster ids; a peer of
// another cluster (or one that refuses this node's) is an error.
func (l *handshakeLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := dialRaft(l.listener.tls, string(address), timeout)
	if err != nil {
		return nil, err
	}
	ident := l.listener.ident
	status, remote, err := clientHandshake(conn, kindRaft, l.group, ident.ID())
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("raft handshake with %s: %w", address, err)
	}
	if status == replyNoGroup {
		conn.Close()
		return nil, &NoGroupError{Addr: string(address), Group: l.group}
	}
	if status == replyRefused {
		conn.Close()
		ferr := &ForeignClusterError{Local: ident.ID(), Remote: remote, Addr: string(address)}
		ident.refused(ferr, "refused by")
		return nil, ferr
	}
	if err := ident.Accept(remote, string(address), "dialled"); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func clientHandshake(conn net.Conn, kind byte, group uint16, id string) (status byte, remote string, err error) {
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	defer conn.SetDeadline(time.Time{})
	if err := writeFrame(conn, kind, group, id); err != nil {
		return 0, "", err
	}
	status, _, remote, err = readFrame(conn)
	return status, remote, err
}

// ProbeClusterID asks the raft port at addr which cluster its node belongs
// to ("" while it does not know), over mutual TLS with the node certificate
// in peerTLS (plain TCP when nil).
func ProbeClusterID(addr string, peerTLS *tlsconf.Store, timeout time.Duration) (string, error) {
	id, _, err := Probe(addr, "", peerTLS, timeout)
	return id, err
}

// Probe asks the raft port at addr which cluster its node belongs to
// on behalf of node nodeID, and whether that cluster welcomes nodeID as a
// member that never held its data.
func Probe(addr, nodeID string, peerTLS *tlsconf.Store, timeout time.Duration) (id string, welcome bool, err error) {
	conn, err := dialRaft(peerTLS, addr, timeout)
	if err != nil {
		return "", false, err
	}
	defer conn.Close()
	status, id, err := clientHandshake(conn, kindProbe, 0, nodeID)
	return id, status == replyWelcome, err
}

// NewLoopbackTransport is a raft transport on a loopback port of its own
// that speaks the handshake as a member of cluster clusterID, over mutual
// TLS with the node certificate in peerTLS (plain TCP when nil): for tools
// and tests that talk raft to a node the way a peer does.
func NewLoopbackTransport(clusterID string, peerTLS *tlsconf.Store) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	layer := newListener(ln, nil, NewClusterIdentity(clusterID, nil, nil), zap.NewNop(), peerTLS).owningGroup(0)
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 1, Timeout: 5 * time.Second}), nil
}
