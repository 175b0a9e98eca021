package cluster

import (
	"fmt"

	"github.com/dexhq/dex/fsm"
	"github.com/hashicorp/raft"
)

// restoreAtStart puts the state of the snapshot raft starts from into f
// before raft starts, which is then told not to restore it again
// (NoSnapshotRestoreOnStart: raft still takes the snapshot's index, term and
// configuration). loaded is that snapshot as the start's check already read
// it; were raft to start from another one, that one is read here.
func restoreAtStart(f *fsm.FSM, snaps raft.SnapshotStore, loaded *loadedSnapshot) error {
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %v", err)
	}
	if len(list) == 0 {
		return nil
	}
	newest := list[0] // raft starts from the first it lists
	if loaded != nil && loaded.ID == newest.ID {
		f.Install(loaded.State)
		f.NotifyRestored()
		return nil
	}
	_, rc, err := snaps.Open(newest.ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %v", newest.ID, err)
	}
	if err := (&raftFSM{f: f}).Restore(rc); err != nil {
		return fmt.Errorf("restore snapshot %s: %w", newest.ID, err)
	}
	return nil
}
