//go:build e2e

package cluster_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/dexhq/dex/cluster"
)

// smallDisk mounts a tmpfs of the given size (e.g. "40m") in a temp dir and
// unmounts it at cleanup. It skips the test when it cannot mount.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a small filesystem needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %s tmpfs: %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// A node from before the WAL keeps its log in raft.db; its first start
// copies the log into a new WAL, whose first segment does not fit on a
// 40 MiB disk. The start is refused naming the full disk, not damage; the
// dir verifies intact, and starts once the disk has room.
func TestFullDisk_MovingTheLogIntoTheWALIsRefusedAsFullNotDamaged(t *testing.T) {
	disk := smallDisk(t, "40m")
	dir := filepath.Join(disk, "data")
	addr := freeAddr(t)
	peers := []cluster.Peer{{ID: "n1", RaftAddr: addr}}
	oldDataDir(t, dir, peers)

	cfg := cluster.Config{ID: "n1", DataDir: dir, RaftAddr: addr, Peers: peers}
	n, err := cluster.Open(cfg, cluster.Hooks{})
	if err == nil {
		n.Shutdown()
		t.Fatal("a node started without room for its WAL segment")
	}
	var full *cluster.DiskFullError
	if !errors.As(err, &full) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("open on a full disk: %v; want a *DiskFullError wrapping ENOSPC", err)
	}
	msg := err.Error()
	for _, want := range []string{"data dir " + dir + " (filesystem tmpfs on " + disk, "is full", "wal.tmp", "64 MiB", "the data dir is not damaged"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("%q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "is damaged") || strings.Contains(msg, "restore") {
		t.Fatalf("a full disk reads as damage: %s", msg)
	}
	t.Log(msg)
	if checked, err := cluster.VerifyDataDir(dir); err != nil {
		t.Fatalf("verify after the refused start: %v (checked %q)", err, checked)
	}

	if out, err := exec.Command("mount", "-o", "remount,size=100m", disk).CombinedOutput(); err != nil {
		t.Fatalf("grow the disk: %v: %s", err, out)
	}
	n, err = cluster.Open(cfg, cluster.Hooks{})
	if err != nil {
		t.Fatalf("open once the disk has room: %v", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	checked, err := cluster.VerifyDataDir(dir)
	if err != nil || !strings.Contains(strings.Join(checked, "\n"), "wal: ") {
		t.Fatalf("verify after the move: %v (checked %q)", err, checked)
	}
}

// oldDataDir makes the data dir of a node bootstrapped before the WAL: its
// configuration entry and term in raft.db.
func oldDataDir(t *testing.T, dir string, peers []cluster.Peer) {
	t.Helper()
	raftDir := filepath.Join(dir, "raft")
	if err := os.MkdirAll(filepath.Join(raftDir, "snapshots"), 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(raftDir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(peers[0].ID)
	_, trans := raft.NewInmemTransport(raft.ServerAddress(peers[0].RaftAddr))
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: raft.ServerAddress(peers[0].RaftAddr)}}}
	if err := raft.BootstrapCluster(rc, store, store, raft.NewInmemSnapshotStore(), trans, conf); err != nil {
		t.Fatal(err)
	}
	ident, err := json.Marshal(cluster.Identity{NodeID: peers[0].ID, Cluster: cluster.ClusterHash(peers)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node.json"), ident, 0o600); err != nil {
		t.Fatal(err)
	}
}
