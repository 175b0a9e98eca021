package peer

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func listenLayer(t *testing.T, id string) (*handshakeLayer, *ClusterIdentity) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ident := NewClusterIdentity(id, nil, nil)
	l := newListener(ln, nil, ident, ident.log, nil).owningGroup(0)
	t.Cleanup(func() { l.Close() })
	return l, ident
}

// acceptOne returns the next connection the layer lets through, or nil.
func acceptOne(l *handshakeLayer) net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		got <- c
	}()
	select {
	case c := <-got:
		return c
	case <-time.After(2 * time.Second):
		return nil
	}
}

// carriesRaftBytes dials from cli to srv and checks that srv is handed the
// connection and reads, after the handshake, what cli writes.
func carriesRaftBytes(t *testing.T, cli, srv *handshakeLayer) {
	t.Helper()
	conn, err := cli.Dial(raft.ServerAddress(srv.Addr().String()), time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	in := acceptOne(srv)
	if in == nil {
		t.Fatal("the accepting side let no connection through")
	}
	defer in.Close()
	if _, err := conn.Write([]byte("rpc")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "rpc" {
		t.Fatalf("after the handshake read %q, %v; want the raft bytes", buf, err)
	}
}

func TestHandshakeSameClusterCarriesRaftBytes(t *testing.T) {
	srv, _ := listenLayer(t, "c1")
	cli, _ := listenLayer(t, "c1")
	carriesRaftBytes(t, cli, srv)
}

func TestHandshakeRefusesAnotherClusterOnBothSides(t *testing.T) {
	srv, srvIdent := listenLayer(t, "c1")
	cli, cliIdent := listenLayer(t, "c2")
	_, err := cli.Dial(raft.ServerAddress(srv.Addr().String()), time.Second)
	var ferr *ForeignClusterError
	if !errors.As(err, &ferr) || ferr.Remote != "c1" || ferr.Local != "c2" {
		t.Fatalf("dial into another cluster: %v; want a ForeignClusterError naming both ids", err)
	}
	if c := acceptOne(srv); c != nil {
		t.Fatal("the accepting side handed a foreign connection to raft")
	}
	if srvIdent.ForeignConnections() != 1 || cliIdent.ForeignConnections() != 1 {
		t.Fatalf("foreign connections counted: accepting %d, dialling %d; want 1 and 1", srvIdent.ForeignConnections(), cliIdent.ForeignConnections())
	}
	if srvIdent.ID() != "c1" || cliIdent.ID() != "c2" {
		t.Fatal("a refused handshake changed a cluster id")
	}
}

func TestHandshakeUnknownIDAdoptsTheFirstHeard(t *testing.T) {
	srv, srvIdent := listenLayer(t, "")
	cli, _ := listenLayer(t, "c1")
	conn, err := cli.Dial(raft.ServerAddress(srv.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := srvIdent.ID(); got != "c1" {
		t.Fatalf("a node without an id has %q after hearing c1", got)
	}
	other, _ := listenLayer(t, "c2")
	if _, err := other.Dial(raft.ServerAddress(srv.Addr().String()), time.Second); err == nil {
		t.Fatal("after adopting c1 the node let c2 in")
	}
}

func TestProbeAndGarbageConnections(t *testing.T) {
	srv, _ := listenLayer(t, "c9")
	id, err := ProbeClusterID(srv.Addr().String(), nil, time.Second)
	if err != nil || id != "c9" {
		t.Fatalf("probe: %q, %v; want c9", id, err)
	}
	raw, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte("\x01garbage-not-a-handshake"))
	raw.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := raw.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection without the handshake was answered")
	}
	raw.Close()
	if c := acceptOne(srv); c != nil {
		t.Fatal("a connection without the handshake reached raft")
	}
}

func TestVoteRefusal(t *testing.T) {
	servers := []raft.Server{
		{ID: "n1", Address: "a1", Suffrage: raft.Voter},
		{ID: "n2", Address: "a2", Suffrage: raft.Voter},
		{ID: "n4", Address: "a4", Suffrage: raft.Nonvoter},
	}
	vote := func(id, addr string, term uint64, transfer bool) *raft.RequestVoteRequest {
		return &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte(id), Addr: []byte(addr)}, Term: term, LeadershipTransfer: transfer}
	}
	for _, tc := range []struct {
		name    string
		req     *raft.RequestVoteRequest
		servers []raft.Server
		refused bool
	}{
		{"voter, next term", vote("n2", "a2", 3, false), servers, false},
		{"voter, far term, ordinary election", vote("n2", "a2", 50, false), servers, false},
		{"voter, transfer at term+1", vote("n2", "a2", 3, true), servers, false},
		{"voter, transfer at term+100", vote("n2", "a2", 102, true), servers, true},
		{"non-voter", vote("n4", "a4", 3, false), servers, true},
		{"stranger", vote("x", "a9", 3, true), servers, true},
		{"stranger with a member's id at another address", vote("n2", "a9", 3, false), servers, true},
		{"no id, a voter's address", vote("", "a1", 3, false), servers, false},
		{"no id, unknown address", vote("", "a9", 3, false), servers, true},
		{"no configuration yet", vote("x", "a9", 3, true), nil, false},
	} {
		got := voteRefusal(tc.req, 2, tc.servers)
		if (got != "") != tc.refused {
			t.Errorf("%s: refusal %q, want refused=%v", tc.name, got, tc.refused)
		}
	}
}
