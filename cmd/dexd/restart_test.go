//go:build e2e

package main

import (
	"strings"
	"testing"
	"time"
)

// waitLeader waits until the node at grpcAddr reports itself leader of a
// one-node cluster with at least minCommit committed.
func waitLeader(t *testing.T, p *proc, grpcAddr string, minCommit uint64) *statusOut {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		s, err := dexctlStatus([]string{grpcAddr})
		if err == nil && s.Leader != "" && len(s.Nodes) == 1 && s.Nodes[0].State == "leader" && s.CommitIndex >= minCommit && s.CommitIndex > 0 {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no leader at %s; stderr:\n%s", grpcAddr, p.stderr.String())
	return nil
}

// A node restarts on its data dir without --peers: its raft configuration
// is in the dir. On an empty dir --peers (or --join) is still required.
func TestRestartWithoutPeers(t *testing.T) {
	dir := t.TempDir()
	a := freeAddrs(t, 3)
	args := []string{"--id", "n1", "--data-dir", dir, "--raft-addr", a[0], "--grpc-addr", a[1], "--http-addr", a[2]}

	code, stderr := runDexd(t, 10*time.Second, append(args[:2:2], "--data-dir", t.TempDir(), "--raft-addr", a[0], "--grpc-addr", a[1], "--http-addr", a[2])...)
	if code != 2 || !strings.Contains(stderr, "--peers is required on a new data dir") {
		t.Fatalf("new dir without --peers: exit %d, stderr %q", code, stderr)
	}

	p := startDexd(t, append(args, "--peers", "n1="+a[0])...)
	before := waitLeader(t, p, a[1], 0)
	p.kill()

	p = startDexd(t, args...)
	// It leads again with everything it had committed.
	waitLeader(t, p, a[1], before.CommitIndex)
}
