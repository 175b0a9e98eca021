//go:build e2e

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
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

// fillDisk writes a file in dir until its filesystem is full, then gives
// back leave bytes, and returns the file: removing it frees the space again.
func fillDisk(t *testing.T, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	size := int64(0)
	for {
		n, err := f.Write(chunk)
		size += int64(n)
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("fill %s: %v", dir, err)
		}
		if err := f.Truncate(max(size-leave, 0)); err != nil {
			t.Fatal(err)
		}
		return path
	}
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

// A node whose disk fills while it runs stops with one line that names the
// disk as full, not its data as damaged, and dexd verify calls the data dir
// intact; once the disk has room the same data dir starts with everything
// it had committed. The log outgrows its preallocated segment either on a
// disk with no space left at all, or on one with some space but not the
// 64 MiB of the next segment, which a restart needs too: it is refused at
// start, naming the full disk.
func TestFullDisk_ARunningNodeStopsNamingTheDiskAndStartsOnceSpaceIsFreed(t *testing.T) {
	for _, c := range []struct {
		name  string
		leave int64
		fails string
	}{
		// The batch that overflows the first segment cannot be written.
		{"no space at all", 0, "raft/wal/00000000000000000001-0000000000000000.wal: no space left on device"},
		// It is written, but the next segment cannot be created.
		{"no space for the next segment", 12 << 20, "create segment "},
	} {
		t.Run(c.name, func(t *testing.T) { runningNodeOnAFullDisk(t, c.leave, c.fails) })
	}
}

func runningNodeOnAFullDisk(t *testing.T, leave int64, fails string) {
	disk := smallDisk(t, "80m")
	dir := filepath.Join(disk, "data")
	a := freeAddrs(t, 3)
	const maxPayload = 32 << 20 // messages of up to 8 MiB
	args := []string{"--id", "n1", "--data-dir", dir, "--raft-addr", a[0], "--grpc-addr", a[1], "--http-addr", a[2],
		"--max-payload", fmt.Sprint(maxPayload)}

	p := startDexd(t, append(args, "--peers", "n1="+a[0])...)
	waitLeader(t, p, a[1], 1)
	fillDisk(t, disk, leave)

	// Messages fill the raft log past its preallocated segment, until a
	// write finds no space.
	conn, err := grpc.NewClient(a[1], grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sessions := dexv1.NewSessionServiceClient(conn)
	text := strings.Repeat("a full disk is not damage. ", (maxPayload/4-1024)/27)
	written := 0
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := sessions.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: fmt.Sprintf("s%d", i), Message: text})
		cancel()
		if err != nil {
			break
		}
		written++
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("dexd still runs 30s after its disk filled; stderr:\n%s", p.stderr.String())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("dexd on a full disk: exit %d, want 1; stderr:\n%s", code, p.stderr.String())
	}
	stderr := p.stderr.String()
	line := lastLine(stderr)
	for _, want := range []string{"dexd: stopping: data dir " + dir, "tmpfs on " + disk, "is full", fails, "no space left on device", "64 MiB", "the data dir is not damaged"} {
		if !strings.Contains(line, want) {
			t.Fatalf("last line does not say %q: %s", want, line)
		}
	}
	notDamageAdvice(t, "dexd", stderr)
	t.Logf("stopped after %d messages of %d MiB: %s", written, len(text)>>20, line)

	if code, out := verifyDataDir(t, dir, disk); code != 1 || !strings.Contains(out, "UNCHECKED ") || !strings.Contains(out, "no space left on device") {
		t.Fatalf("dexd verify copying the WAL to the full disk: exit %d\n%s", code, out)
	} else {
		notDamageAdvice(t, "dexd verify", out)
	}
	if code, out := verifyDataDir(t, dir, ""); code != 0 || !strings.Contains(out, "is intact") {
		t.Fatalf("dexd verify of the stopped node: exit %d\n%s", code, out)
	}
	if leave > 0 {
		code, stderr := runDexd(t, 15*time.Second, args...)
		if code != 1 || !strings.Contains(stderr, "is full: open "+filepath.Join(dir, "raft", "wal")+": create segment ") || !strings.Contains(stderr, "the data dir is not damaged") {
			t.Fatalf("a restart on the disk still without room for the segment: exit %d, stderr:\n%s", code, stderr)
		}
		notDamageAdvice(t, "dexd", stderr)
	}

	if out, err := exec.Command("mount", "-o", "remount,size=200m", disk).CombinedOutput(); err != nil {
		t.Fatalf("grow the disk: %v: %s", err, out)
	}
	p = startDexd(t, args...)
	s := waitLeader(t, p, a[1], 1)
	for i := 0; i < written; i++ {
		deadline := time.Now().Add(15 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := sessions.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: fmt.Sprintf("s%d", i)})
			cancel()
			if err == nil {
				break
			}
			if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
				t.Fatalf("session s%d, committed before the disk was full, after the restart: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stopDexd(t, p)

	if code, out := verifyDataDir(t, dir, ""); code != 0 || !strings.Contains(out, "is intact") {
		t.Fatalf("dexd verify after the restart (commit index %d): exit %d\n%s", s.CommitIndex, code, out)
	}
}

// verifyDataDir runs dexd verify on dir, with its temporary files in tmp
// when given, and returns its exit code and output.
func verifyDataDir(t *testing.T, dir, tmp string) (int, string) {
	t.Helper()
	cmd := exec.Command(dexdBin, "verify", "--data-dir", dir)
	if tmp != "" {
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if exit != nil {
		return exit.ExitCode(), string(out)
	}
	return 0, string(out)
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

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
