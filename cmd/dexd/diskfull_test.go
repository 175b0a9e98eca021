package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// notDamageAdvice fails the test if a message about a full disk calls the
// data dir damaged or sends the operator to restore it.
func notDamageAdvice(t *testing.T, what, msg string) {
	t.Helper()
	for _, bad := range []string{"is damaged", "restore this node", "DAMAGED"} {
		if strings.Contains(msg, bad) {
			t.Fatalf("%s says %q of a full disk:\n%s", what, bad, msg)
		}
	}
}

// A new node on a 40 MiB disk cannot hold the 64 MiB segment raft-wal
// preallocates: dexd refuses at once, naming the need and what is free, and
// leaves nothing behind, so the same dir starts once the disk is larger.
func TestFullDisk_ANewNodeOnA40MiBDiskIsRefusedWithTheSpaceItNeeds(t *testing.T) {
	disk := smallDisk(t, "40m")
	dir := filepath.Join(disk, "data")
	a := freeAddrs(t, 3)
	args := []string{"--id", "n1", "--data-dir", dir, "--raft-addr", a[0], "--grpc-addr", a[1], "--http-addr", a[2], "--peers", "n1=" + a[0]}

	code, stderr := runDexd(t, 15*time.Second, args...)
	if code != 1 || strings.Count(stderr, "\n") != 0 {
		t.Fatalf("a new node on a 40 MiB disk: exit %d, want 1 and one line; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"data dir " + dir, "tmpfs on " + disk, "40 MiB free", "too little space for a new node", "64 MiB for the first segment of the raft log"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("refusal does not say %q: %s", want, stderr)
		}
	}
	notDamageAdvice(t, "dexd", stderr)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the refused start left %d files in the data dir", len(entries))
	}

	if out, err := exec.Command("mount", "-o", "remount,size=100m", disk).CombinedOutput(); err != nil {
		t.Fatalf("grow the disk: %v: %s", err, out)
	}
	p := startDexd(t, args...)
	waitLeader(t, p, a[1], 1)
	stopDexd(t, p)
}

// stopDexd stops dexd with SIGTERM and wants exit 0.
func stopDexd(t *testing.T, p *proc) {
	t.Helper()
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, p, 30*time.Second); code != 0 {
		t.Fatalf("dexd after SIGTERM: exit %d; stderr:\n%s", code, p.stderr.String())
	}
}
