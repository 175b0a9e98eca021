package logstore

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// A write refused for lack of space is named a full disk however deeply it
// is wrapped, keeps its errno for errors.Is, and never reads as damage.
func TestDiskFull_ClassifiesThroughWrapping(t *testing.T) {
	dir := t.TempDir()
	write := &fs.PathError{Op: "write", Path: dir + "/raft/wal/1.wal", Err: syscall.ENOSPC}
	for _, err := range []error{
		syscall.ENOSPC,
		write,
		fmt.Errorf("open %s: %w", dir, fmt.Errorf("create segment 1.wal: %w", write)),
	} {
		got := DiskFull(dir, err)
		var full *DiskFullError
		if !errors.As(got, &full) || !errors.Is(got, syscall.ENOSPC) || !IsDiskFull(got) {
			t.Fatalf("DiskFull(%v) = %#v: want a *DiskFullError that is still ENOSPC", err, got)
		}
		msg := got.Error()
		for _, want := range []string{"data dir " + dir + " (", " free) is full: ", err.Error(), "Dex needs 64 MiB free", "the data dir is not damaged"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("%q does not say %q", msg, want)
			}
		}
		if strings.Contains(msg, "is damaged") || strings.Contains(msg, "restore") {
			t.Fatalf("a full disk reads as damage: %s", msg)
		}
		if again := DiskFull(dir, fmt.Errorf("at start: %w", got)); !strings.HasPrefix(again.Error(), "at start: data dir ") {
			t.Fatalf("named twice: %v", again)
		}
	}

	quota := DiskFull(dir, fmt.Errorf("store: %w", syscall.EDQUOT))
	if !errors.Is(quota, syscall.EDQUOT) || !strings.Contains(quota.Error(), "is over its disk quota") || !strings.Contains(quota.Error(), "raise the quota or free space") {
		t.Fatalf("a quota: %v", quota)
	}

	damage := &DamageError{Path: dir, Reason: "is damaged: bad"}
	for _, err := range []error{nil, syscall.EIO, fmt.Errorf("read: %w", syscall.EIO), damage} {
		if got := DiskFull(dir, err); got != err || IsDiskFull(err) {
			t.Fatalf("DiskFull(%v) = %v: want it unchanged", err, got)
		}
	}
}

func TestDiskFull_SizesInMiB(t *testing.T) {
	for b, want := range map[uint64]string{0: "0 MiB", 64 << 20: "64 MiB", 40<<20 - 100<<10: "39.9 MiB", 300 << 10: "0.3 MiB"} {
		if got := mib(b); got != want {
			t.Errorf("mib(%d) = %q, want %q", b, got, want)
		}
	}
}
