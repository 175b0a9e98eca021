package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/dexhq/dex/fsm"
)

func writeSnapshot(t *testing.T, snaps *raft.FileSnapshotStore, index uint64, fill func(sink raft.SnapshotSink) error) {
	t.Helper()
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fill(sink); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

// Every snapshot a node keeps is restored, and one that does not restore
// says why.
func TestRestoreSnapshotsReportsOneThatDoesNotRestore(t *testing.T) {
	dir := t.TempDir()
	if got, err := RestoreSnapshots(dir); err != nil || len(got) != 0 {
		t.Fatalf("a data dir without snapshots: %v, %v", got, err)
	}
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dir, "raft"), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, snaps, 10, func(sink raft.SnapshotSink) error {
		s := fsm.New(fsm.Options{}).Snapshot()
		defer s.Release()
		return s.Persist(sink)
	})
	writeSnapshot(t, snaps, 20, func(sink raft.SnapshotSink) error {
		_, err := sink.Write([]byte("not a state snapshot"))
		return err
	})
	got, err := RestoreSnapshots(dir)
	if err != nil || len(got) != 2 {
		t.Fatalf("%v, %v", got, err)
	}
	if got[0].Index != 20 || got[0].Err == "" || got[1].Index != 10 || got[1].Err != "" {
		t.Fatalf("newest first, the damaged one named: %+v", got)
	}
	// One the node set aside at a start is named too.
	aside := filepath.Join(dir, "raft", unreadableDir, "3-30-1700000000000")
	if err := os.MkdirAll(aside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(aside, "state.bin"), []byte("not a state snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = RestoreSnapshots(dir)
	if err != nil || len(got) != 3 || got[2].Index != 30 || !strings.Contains(got[2].Err, "set aside") {
		t.Fatalf("%+v, %v", got, err)
	}
}
