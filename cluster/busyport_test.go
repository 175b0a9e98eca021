package cluster_test

import (
	"net"
	"strings"
	"testing"

	"github.com/dexhq/dex/cluster"
)

// A busy raft port is reported as such, the store closed, and the data dir
// opens again once the port is free: it is not called damaged (an operator
// told so might delete a healthy data dir).
func TestBusyRaftPortIsNotADamagedStore(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := busy.Addr().String()
	cfg := cluster.Config{ID: "n1", DataDir: dir, RaftAddr: addr, Peers: []cluster.Peer{{ID: "n1", RaftAddr: addr}}}
	_, err = cluster.Open(cfg, cluster.Hooks{})
	if err == nil || !strings.Contains(err.Error(), "listen on raft address "+addr) || strings.Contains(err.Error(), "damaged") {
		t.Fatalf("open on a busy raft port: %v; want a clear listen error", err)
	}
	busy.Close()
	n, err := cluster.Open(cfg, cluster.Hooks{})
	if err != nil {
		t.Fatalf("open after the port was freed: %v (the store was left locked?)", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
}
