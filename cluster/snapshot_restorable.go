package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dexhq/dex/cluster/internal/logstore"
	"github.com/dexhq/dex/fsm"
)

// unreadableDir holds the snapshots a node set aside because they do not
// restore; raft lists only raft/snapshots.
const unreadableDir = "snapshots.unreadable"

// restoreCheck proves that the snapshot a node starts from restores, so that
// a CRC that matches is not the last word. Offline (`dexd verify`, readOnly)
// every snapshot is restored into a scratch state machine by the restore's
// own code. At start the newest is loaded, and what it loaded is the state
// the node starts with (read once, not once to check and once more to
// restore); if it does not load, the node sets it aside and starts from the
// newest older one that does, provided its log reaches back to that
// snapshot, and says so in the returned note. It returns the snapshots raft
// will see and, at start, the newest loaded.
func restoreCheck(raftDir string, snaps []logstore.SnapshotCheck, firstIndex uint64, readOnly bool) ([]logstore.SnapshotCheck, string, *loadedSnapshot, error) {
	snaps = slices.Clone(snaps)
	slices.SortFunc(snaps, func(a, b logstore.SnapshotCheck) int { return cmpIndex(b.Index, a.Index) })
	if readOnly {
		var lines []string
		for _, s := range snaps {
			line, err := restoreSnapshotFile(raftDir, s)
			if err != nil {
				return snaps, strings.Join(lines, "\n"), nil, err
			}
			lines = append(lines, line)
		}
		return snaps, strings.Join(lines, "\n"), nil, nil
	}
	var bad []logstore.SnapshotCheck
	var firstErr error
	for i, s := range snaps {
		state, err := loadSnapshotFile(raftDir, s)
		if err == nil {
			loaded := &loadedSnapshot{ID: s.ID, State: state}
			if i == 0 {
				return snaps, "", loaded, nil
			}
			if firstIndex > s.Index+1 {
				return snaps, "", nil, &DamageError{Path: statePath(raftDir, snaps[0]), Reason: fmt.Sprintf("does not restore (%v), and the log starts at entry %d, after the older snapshot %s (entry %d) that does", firstErr, firstIndex, s.ID, s.Index)}
			}
			note, err := setAside(raftDir, bad, firstErr)
			if err != nil {
				return snaps, "", nil, err
			}
			return snaps[i:], fmt.Sprintf("%s; starting from snapshot %s (entry %d) and the log after it", note, s.ID, s.Index), loaded, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		bad = append(bad, s)
	}
	if len(bad) == 0 {
		return snaps, "", nil, nil
	}
	return snaps, "", nil, &DamageError{Path: statePath(raftDir, snaps[0]), Reason: fmt.Sprintf("does not restore, nor does any older snapshot: %v", firstErr)}
}

func cmpIndex(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func statePath(raftDir string, s logstore.SnapshotCheck) string {
	return filepath.Join(raftDir, "snapshots", s.ID, "state.bin")
}

// loadedSnapshot is the snapshot a node starts from, loaded by its check.
type loadedSnapshot struct {
	ID    string
	State *fsm.Loaded
}

// loadSnapshotFile loads a snapshot as a restore does.
func loadSnapshotFile(raftDir string, s logstore.SnapshotCheck) (*fsm.Loaded, error) {
	f, err := os.Open(statePath(raftDir, s))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fsm.LoadSnapshot(bufio.NewReaderSize(f, 1<<20))
}

// restoreSnapshotFile decodes a snapshot, then restores it into a scratch
// state machine, and says what it read.
func restoreSnapshotFile(raftDir string, s logstore.SnapshotCheck) (string, error) {
	path := statePath(raftDir, s)
	f, err := os.Open(path)
	if err != nil {
		return "", &DamageError{Path: path, Reason: fmt.Sprintf("cannot be read: %v", err)}
	}
	defer f.Close()
	sum, err := fsm.CheckSnapshot(f)
	if err == nil {
		if _, err = f.Seek(0, io.SeekStart); err == nil {
			err = fsm.New(fsm.Options{}).Restore(f)
		}
	}
	if err != nil {
		return "", &DamageError{Path: path, Reason: fmt.Sprintf("does not restore: %v", err)}
	}
	return fmt.Sprintf("snapshots/%s: restores (%d records, the largest %d bytes)", s.ID, sum.Records, sum.Largest), nil
}

// setAside moves the snapshots that do not restore out of raft's sight,
// keeping them for an operator to look at.
func setAside(raftDir string, bad []logstore.SnapshotCheck, why error) (string, error) {
	dest := filepath.Join(raftDir, unreadableDir)
	if err := os.MkdirAll(dest, 0o700); err != nil {
		return "", fmt.Errorf("set aside snapshots that do not restore: %v", err)
	}
	ids := make([]string, 0, len(bad))
	for _, s := range bad {
		if err := os.Rename(filepath.Join(raftDir, "snapshots", s.ID), filepath.Join(dest, s.ID)); err != nil {
			return "", fmt.Errorf("set aside snapshot %s, which does not restore: %v", s.ID, err)
		}
		ids = append(ids, s.ID)
	}
	if err := errors.Join(logstore.SyncDir(dest), logstore.SyncDir(filepath.Join(raftDir, "snapshots"))); err != nil {
		return "", fmt.Errorf("set aside snapshots that do not restore: %v", err)
	}
	return fmt.Sprintf("snapshot %v does not restore (%v): moved to %s", ids, why, dest), nil
}
