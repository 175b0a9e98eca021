package cluster

import (
	"io"
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
// newest when it starts (falling back to an older one when that fails).
// The node's log and snapshots are not changed. A node that took no
// snapshot yet gives none.
func RestoreSnapshots(dataDir string) ([]SnapshotRestore, error) {
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dataDir, "raft"), 2, io.Discard)
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
	return out, nil
}

func restoreOne(snaps *raft.FileSnapshotStore, id string) error {
	_, rc, err := snaps.Open(id)
	if err != nil {
		return err
	}
	defer rc.Close()
	return fsm.New(fsm.Options{}).Restore(rc)
}
