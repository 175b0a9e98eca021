package logstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// walNode is a stopped node's raft dir: raft.db (stable) and raft/wal.
type walNode struct {
	t       *testing.T
	raftDir string
}

func newWALNode(t *testing.T) *walNode {
	raftDir := filepath.Join(t.TempDir(), "raft")
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(raftDir, "snapshots"), 0o700); err != nil {
		t.Fatal(err)
	}
	return &walNode{t: t, raftDir: raftDir}
}

// open opens both stores the way a node's start does and returns the
// checked log, or the error the checks gave. close closes both.
func (n *walNode) open() (logs *CheckedLogStore, close func(), err error) {
	n.t.Helper()
	store := openBolt(n.t, filepath.Join(n.raftDir, "raft.db"))
	if err := MigrateBoltLog(store, n.raftDir, n.raftDir, hclog.NewNullLogger()); err != nil {
		store.Close()
		return nil, nil, err
	}
	w, err := OpenWAL(WALDir(n.raftDir), n.raftDir, hclog.NewNullLogger(), nil)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	logs, err = openChecked(store, w, WALDir(n.raftDir), n.raftDir)
	close = func() { w.Close(); store.Close() }
	if err != nil {
		close()
		return nil, nil, err
	}
	return logs, close, nil
}

// openChecked runs the checks a node's start makes before raft reads the
// log (the cluster's openCheckedLog, without its restore of snapshots):
// every entry's checksum, the snapshots, and the stored-up-to mark.
func openChecked(store *raftboltdb.BoltStore, logs raft.LogStore, dir, raftDir string) (*CheckedLogStore, error) {
	hasState, err := HasRaftState(logs, store)
	if err != nil {
		return nil, err
	}
	checked, err := NewCheckedLogStore(logs, store, dir, false)
	if err != nil {
		return nil, err
	}
	if _, err := checked.VerifyLog(); err != nil {
		return nil, err
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return nil, err
	}
	snaps, err := CheckSnapshots(raftDir, first, hasState)
	if err != nil {
		return nil, err
	}
	var newest uint64
	for _, s := range snaps {
		newest = max(newest, s.Index)
	}
	if err := checked.CheckStoredUpTo(newest); err != nil {
		return nil, err
	}
	return checked, nil
}

func (n *walNode) mustOpen() (*CheckedLogStore, func()) {
	n.t.Helper()
	logs, close, err := n.open()
	if err != nil {
		n.t.Fatal(err)
	}
	return logs, close
}

func storeEntries(t *testing.T, logs raft.LogStore, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := logs.StoreLogs([]*raft.Log{entry(i, "entry")}); err != nil {
			t.Fatal(err)
		}
	}
}

func lastIndex(t *testing.T, logs raft.LogStore) uint64 {
	t.Helper()
	last, err := logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// tailSegment is the path of the WAL's newest segment file.
func (n *walNode) tailSegment() string {
	n.t.Helper()
	segs, err := filepath.Glob(filepath.Join(WALDir(n.raftDir), "*.wal"))
	if err != nil || len(segs) == 0 {
		n.t.Fatalf("no segment file in %s (%v)", WALDir(n.raftDir), err)
	}
	return segs[len(segs)-1]
}

func TestWAL_ALogCutBelowTheStoredMarkIsRefused(t *testing.T) {
	n := newWALNode(t)
	logs, close := n.mustOpen()
	storeEntries(t, logs, 1, 20)
	if err := logs.RecordStoredUpTo(); err != nil {
		t.Fatal(err)
	}
	close()

	// The open segment is cut just after its header: the WAL reads an empty
	// log, as after a torn first write, but 20 entries were stored.
	if err := os.Truncate(n.tailSegment(), 100); err != nil {
		t.Fatal(err)
	}
	_, _, err := n.open()
	var d *DamageError
	if !errors.As(err, &d) || d.Path != WALDir(n.raftDir) || !strings.Contains(err.Error(), "entries up to 20 were stored") {
		t.Fatalf("open of a cut log: %v", err)
	}
}

func TestWAL_ADeletedTailSegmentIsRefused(t *testing.T) {
	n := newWALNode(t)
	logs, close := n.mustOpen()
	storeEntries(t, logs, 1, 5)
	if err := logs.RecordStoredUpTo(); err != nil {
		t.Fatal(err)
	}
	close()
	if err := os.Remove(n.tailSegment()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.open(); err == nil || !strings.Contains(err.Error(), "cut or lost") {
		t.Fatalf("open without the tail segment: %v", err)
	}
}

func TestWAL_RaftsOwnTruncationsLowerTheMark(t *testing.T) {
	n := newWALNode(t)
	logs, close := n.mustOpen()
	storeEntries(t, logs, 1, 10)
	if err := logs.RecordStoredUpTo(); err != nil {
		t.Fatal(err)
	}
	// A conflicting tail: entries 8..10 go, then the log grows again.
	if err := logs.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	if got := logs.StoredUpTo(); got != 7 {
		t.Fatalf("mark after dropping the tail 8..10: %d, want 7", got)
	}
	close()

	logs, close = n.mustOpen()
	defer close()
	if got := lastIndex(t, logs); got != 7 {
		t.Fatalf("last index after reopen: %d", got)
	}
	storeEntries(t, logs, 8, 9)
	if err := logs.RecordStoredUpTo(); err != nil || logs.StoredUpTo() != 9 {
		t.Fatalf("mark after storing 8..9: %d (%v)", logs.StoredUpTo(), err)
	}
	// Compaction of the head leaves the mark alone.
	if err := logs.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	if got := logs.StoredUpTo(); got != 9 {
		t.Fatalf("mark after compacting 1..3: %d, want 9", got)
	}
	if !logs.IsMonotonic() {
		t.Fatal("the checked WAL does not say it is monotonic: raft would leave gaps the WAL refuses")
	}
}

func TestWAL_ASnapshotCoversALogDroppedUnderIt(t *testing.T) {
	n := newWALNode(t)
	logs, close := n.mustOpen()
	defer close()
	storeEntries(t, logs, 1, 10)
	if err := logs.RecordStoredUpTo(); err != nil {
		t.Fatal(err)
	}
	// An installed snapshot: raft drops the whole log of a monotonic store.
	if err := logs.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if err := logs.CheckStoredUpTo(12); err != nil {
		t.Fatalf("a log dropped under a snapshot at 12: %v", err)
	}
	logs.mark = 15 // as if entries up to 15 had been stored
	if err := logs.CheckStoredUpTo(12); err == nil {
		t.Fatal("a log ending at 0 with a snapshot at 12 passed a mark of 15")
	}
}

// raft never cuts a log short below its snapshot and keeps the rest: a
// snapshot does not excuse a log that ends below the mark.
func TestWAL_ASnapshotDoesNotCoverALogCutShort(t *testing.T) {
	n := newWALNode(t)
	logs, close := n.mustOpen()
	defer close()
	storeEntries(t, logs, 1, 15)
	if err := logs.RecordStoredUpTo(); err != nil {
		t.Fatal(err)
	}
	logs.mark = 20 // entries up to 20 were stored; the log now ends at 15
	if err := logs.CheckStoredUpTo(20); err == nil || !strings.Contains(err.Error(), "ends at entry 15, but entries up to 20") {
		t.Fatalf("a log cut to 15 under a snapshot at 20: %v", err)
	}
}

func TestWAL_ALogInRaftDBMovesIntoTheWAL(t *testing.T) {
	n := newWALNode(t)
	// A data dir from before the WAL: the log, with checksums, in raft.db.
	dbPath := filepath.Join(n.raftDir, "raft.db")
	old := openBolt(t, dbPath)
	storeEntries(t, checked(t, old, dbPath), 1, 30)
	old.Close()
	// A copy cut short by a crash is started again.
	if err := os.MkdirAll(WALDir(n.raftDir)+".tmp", 0o700); err != nil {
		t.Fatal(err)
	}

	logs, close := n.mustOpen()
	for i := uint64(1); i <= 30; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil || string(l.Data) != "entry" || l.Index != i {
			t.Fatalf("entry %d after the move: %+v, %v", i, l, err)
		}
	}
	storeEntries(t, logs, 31, 31)
	close()
	if _, err := os.Stat(WALDir(n.raftDir) + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("wal.tmp left behind: %v", err)
	}
	db := openBolt(t, dbPath)
	if last := lastIndex(t, db); last != 0 {
		t.Fatalf("raft.db still holds a log up to %d after the move", last)
	}
	db.Close()

	// The next start finds the WAL and moves nothing.
	logs, close = n.mustOpen()
	defer close()
	if last := lastIndex(t, logs); last != 31 {
		t.Fatalf("last index on the next start: %d", last)
	}
}

func TestWAL_ADamagedLogInRaftDBIsNotMoved(t *testing.T) {
	n := newWALNode(t)
	dbPath := filepath.Join(n.raftDir, "raft.db")
	old := openBolt(t, dbPath)
	c := checked(t, old, dbPath)
	storeEntries(t, c, 1, 3)
	if err := c.StoreLogs([]*raft.Log{entry(4, "marker-AAAA")}); err != nil {
		t.Fatal(err)
	}
	old.Close()
	replaceInFile(t, dbPath, "marker-AAAA", "marker-ZZZZ")

	_, _, err := n.open()
	if err == nil || !strings.Contains(err.Error(), "raft log entry 4 in "+dbPath) {
		t.Fatalf("open of a damaged raft.db log: %v", err)
	}
	if _, err := os.Stat(WALDir(n.raftDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a WAL was made from a damaged log: %v", err)
	}
}
