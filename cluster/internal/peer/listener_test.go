package peer

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func listen(t *testing.T, id string) *Listener {
	t.Helper()
	l, err := Listen("127.0.0.1:0", nil, NewClusterIdentity(id, nil, nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func groupOf(t *testing.T, l *Listener, g uint16) *handshakeLayer {
	t.Helper()
	layer, err := l.Group(g)
	if err != nil {
		t.Fatal(err)
	}
	return layer.(*handshakeLayer)
}

// A cluster of one partition speaks the handshake it spoke before
// partitions, byte for byte; another group's frame names it.
func TestGroupZeroFrameIsTheFormBeforePartitions(t *testing.T) {
	var b bytes.Buffer
	if err := writeFrame(&b, kindRaft, 0, "c1"); err != nil {
		t.Fatal(err)
	}
	if want := "DEXRAFT1R\x02c1"; b.String() != want {
		t.Fatalf("group 0's frame %q; want %q", b.String(), want)
	}
	b.Reset()
	if err := writeFrame(&b, kindRaft, 258, "c1"); err != nil {
		t.Fatal(err)
	}
	if want := "DEXRAFT2R\x01\x02\x02c1"; b.String() != want {
		t.Fatalf("group 258's frame %q; want %q", b.String(), want)
	}
	kind, group, id, err := readFrame(&b)
	if err != nil || kind != kindRaft || group != 258 || id != "c1" {
		t.Fatalf("read back: kind %q, group %d, id %q, %v", kind, group, id, err)
	}
}

func TestListenerHandsEachGroupItsOwnConnections(t *testing.T) {
	srv := listen(t, "c1")
	srv0, srv3 := groupOf(t, srv, 0), groupOf(t, srv, 3)
	cli3 := groupOf(t, listen(t, "c1"), 3)

	carriesRaftBytes(t, cli3, srv3)
	if c := acceptOne(srv0); c != nil {
		t.Fatal("group 0 was handed group 3's connection")
	}
}

func TestListenerRefusesAGroupItDoesNotHold(t *testing.T) {
	srv := listen(t, "c1")
	srv0, srv2 := groupOf(t, srv, 0), groupOf(t, srv, 2)
	cli := listen(t, "c1")
	cli5 := groupOf(t, cli, 5)
	_, err := cli5.Dial(raft.ServerAddress(srv.Addr().String()), time.Second)
	var nerr *NoGroupError
	if !errors.As(err, &nerr) || nerr.Group != 5 {
		t.Fatalf("dial a group the node does not hold: %v; want a NoGroupError naming partition 5", err)
	}

	// A closed group is refused from then on; the other groups still serve.
	if err := srv2.Close(); err != nil {
		t.Fatal(err)
	}
	cli2 := groupOf(t, cli, 2)
	if _, err := cli2.Dial(raft.ServerAddress(srv.Addr().String()), time.Second); !errors.As(err, &nerr) || nerr.Group != 2 {
		t.Fatalf("dial a closed group: %v; want a NoGroupError naming partition 2", err)
	}
	cli0 := groupOf(t, cli, 0)
	conn, err := cli0.Dial(raft.ServerAddress(srv.Addr().String()), time.Second)
	if err != nil {
		t.Fatalf("group 0 after group 2 closed: %v", err)
	}
	conn.Close()
	if c := acceptOne(srv0); c == nil {
		t.Fatal("group 0 stopped serving when group 2 closed")
	}
}

func TestListenerRefusesAForeignClusterBeforeTheGroup(t *testing.T) {
	srv := listen(t, "c1")
	groupOf(t, srv, 1)
	cli1 := groupOf(t, listen(t, "c2"), 1)
	_, err := cli1.Dial(raft.ServerAddress(srv.Addr().String()), time.Second)
	var ferr *ForeignClusterError
	if !errors.As(err, &ferr) || ferr.Remote != "c1" {
		t.Fatalf("dial group 1 of another cluster: %v; want a ForeignClusterError", err)
	}
}

func TestListenerGroupOnce(t *testing.T) {
	l := listen(t, "c1")
	groupOf(t, l, 4)
	if _, err := l.Group(4); err == nil {
		t.Fatal("a second stream layer for group 4 was made")
	}
	if got := l.Addr().(*net.TCPAddr); got.IP.String() != "127.0.0.1" {
		t.Fatalf("listener address %v", got)
	}
}
