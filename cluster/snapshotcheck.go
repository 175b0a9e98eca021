package cluster

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/dexhq/dex/fsm"
)

// SnapshotRestore is one snapshot of a node's data dir restored offline.
type SnapshotRestore struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"`
	Size  int64  `json:"size"`
	// Err: why the snapshot did not restore ("" when it did).
	Err string `json:"err,omitempty"`
}

// RestoreSnapshots restores every snapshot a stopped node keeps, newest
// first, each into a state machine of its own, as the node does with the
// newest when it starts, then lists those the node set aside at a start
// because they did not restore (each an error, whatever it says now).
// The node's log and snapshots are not changed. A node that took no
// snapshot yet gives none.
func RestoreSnapshots(dataDir string) ([]SnapshotRestore, error) {
	raftDir := filepath.Join(dataDir, "raft")
	snaps, err := raft.NewFileSnapshotStore(raftDir, 2, io.Discard)
	if err != nil {
		return nil, err
	}
	metas, err := snaps.List()
	if err != nil {
		return nil, err
	}
	var out []SnapshotRestore
	for _, m := range metas {
		r := SnapshotRestore{ID: m.ID, Index: m.Index, Size: m.Size}
		if err := restoreOne(snaps, m.ID); err != nil {
			r.Err = err.Error()
		}
		out = append(out, r)
	}
	aside, err := setAsideSnapshots(raftDir)
	return append(out, aside...), err
}

// setAsideSnapshots lists the snapshots in raft/snapshots.unreadable.
func setAsideSnapshots(raftDir string) ([]SnapshotRestore, error) {
	dir := filepath.Join(raftDir, unreadableDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SnapshotRestore
	for _, e := range entries {
		r := SnapshotRestore{ID: e.Name(), Err: "set aside by the node at a start: it did not restore"}
		var term uint64
		_, _ = fmt.Sscanf(e.Name(), "%d-%d-", &term, &r.Index)
		if err := restoreFile(filepath.Join(dir, e.Name(), "state.bin")); err != nil {
			r.Err += " (" + err.Error() + ")"
		}
		if fi, err := os.Stat(filepath.Join(dir, e.Name(), "state.bin")); err == nil {
			r.Size = fi.Size()
		}
		out = append(out, r)
	}
	return out, nil
}

func restoreFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return fsm.New(fsm.Options{}).Restore(f)
}

func restoreOne(snaps *raft.FileSnapshotStore, id string) error {
	_, rc, err := snaps.Open(id)
	if err != nil {
		return err
	}
	defer rc.Close()
	return fsm.New(fsm.Options{}).Restore(rc)
}
