package logstore

import (
	"errors"
	"fmt"
	"syscall"
)

// A full disk is not damage: a write the filesystem refused for lack of
// space (ENOSPC) or quota (EDQUOT) leaves the data dir as it was, and the
// node starts on it again once space is freed. Calling it damaged would send
// an operator to wipe a healthy node.

// walSegmentSize is what raft-wal preallocates for each segment of the raft
// log (its default): the most Dex asks of the disk at once.
const walSegmentSize = 64 << 20

// storesHeadroom is room for raft.db and wal-meta.db beside a new node's
// first segment.
const storesHeadroom = 1 << 20

// DiskFullError is a write to the data dir that its filesystem refused for
// lack of space or quota. The data dir is not damaged.
type DiskFullError struct {
	DataDir string
	Space   string // the filesystem and its free space after the write failed; "" when unknown
	Err     error  // the failed write, ENOSPC or EDQUOT underneath
}

func (e *DiskFullError) Error() string {
	full, fix := "is full", "free space"
	if errors.Is(e.Err, syscall.EDQUOT) {
		full, fix = "is over its disk quota", "raise the quota or free space"
	}
	where := e.DataDir
	if e.Space != "" {
		where += " (" + e.Space + ")"
	}
	return fmt.Sprintf("data dir %s %s: %v; Dex needs %s free for the next segment of the raft log (raft/wal): %s and start again — the data dir is not damaged",
		where, full, e.Err, mib(walSegmentSize), fix)
}

func (e *DiskFullError) Unwrap() error { return e.Err }

// IsDiskFull reports whether err is, underneath its wrapping, a write refused
// for lack of space (ENOSPC) or quota (EDQUOT).
func IsDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// DiskFull names a full disk for what it is, measuring the data dir's
// filesystem now; any other error is returned as it is.
func DiskFull(dataDir string, err error) error {
	var done *DiskFullError
	if !IsDiskFull(err) || errors.As(err, &done) {
		return err
	}
	e := &DiskFullError{DataDir: dataDir, Err: err}
	if d, ok := statDisk(dataDir); ok {
		e.Space = d.String()
	}
	return e
}

// CheckFreshSpace refuses to start a new node on a filesystem without room
// for the raft log's first segment: raft-wal preallocates it whole, so the
// node could not even start, and would leave a half-made data dir behind.
func CheckFreshSpace(dataDir string) error {
	d, ok := statDisk(dataDir)
	need := uint64(walSegmentSize + storesHeadroom)
	if !ok || d.free >= need {
		return nil // unknown: the writes themselves will tell
	}
	return fmt.Errorf("data dir %s (%s) has too little space for a new node: it needs %s free, %s for the first segment of the raft log (raft/wal) and %s for raft.db; free space or give the data dir a larger disk",
		dataDir, d, mib(need), mib(walSegmentSize), mib(storesHeadroom))
}

// diskSpace is a filesystem as statDisk found it.
type diskSpace struct {
	free          uint64 // bytes an unprivileged writer may still use
	source, mount string // "" when unknown
}

func (d diskSpace) String() string {
	if d.mount == "" {
		return mib(d.free) + " free"
	}
	return fmt.Sprintf("filesystem %s on %s, %s free", d.source, d.mount, mib(d.free))
}

// mib writes a byte count in MiB: whole when it is, else to a tenth.
func mib(b uint64) string {
	if b%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
