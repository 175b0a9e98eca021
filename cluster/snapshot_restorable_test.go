package cluster

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/dexhq/dex/cluster/internal/logstore"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// addSnapshot writes a snapshot up to index into raftDir's store: the
// state's own bytes when state is nil, else the given bytes (whose CRC64
// raft computes, so they pass every check but a restore).
func addSnapshot(t *testing.T, raftDir string, index uint64, state []byte) logstore.SnapshotCheck {
	t.Helper()
	fs, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 3, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	sink, err := fs.Create(raft.SnapshotVersionMax, index, 2, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if state == nil {
		err = fsm.New(fsm.Options{}).Snapshot().Persist(sink)
	} else {
		_, err = sink.Write(state)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return logstore.SnapshotCheck{ID: sink.ID(), Index: index}
}

// A record whose length runs past the end: its CRC matches, it does not decode.
var undecodable = []byte("DEXSNAP\x03\xff\xff\x7fnot a record")

func TestRestoreCheck_StartsFromAnOlderSnapshotWhenTheNewestDoesNotRestore(t *testing.T) {
	raftDir := t.TempDir()
	good := addSnapshot(t, raftDir, 100, nil)
	bad := addSnapshot(t, raftDir, 200, undecodable)

	kept, note, loaded, err := restoreCheck(raftDir, []logstore.SnapshotCheck{good, bad}, 101, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].ID != good.ID {
		t.Fatalf("raft is left %+v; want the older snapshot only", kept)
	}
	if loaded == nil || loaded.ID != good.ID {
		t.Fatalf("the node starts from %+v; want the state of %s", loaded, good.ID)
	}
	for _, want := range []string{bad.ID, "does not restore", unreadableDir, "starting from snapshot " + good.ID} {
		if !strings.Contains(note, want) {
			t.Fatalf("the note %q does not say %q", note, want)
		}
	}
	if _, err := os.Stat(filepath.Join(raftDir, "snapshots", bad.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the snapshot that does not restore is still where raft reads it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(raftDir, unreadableDir, bad.ID, "state.bin")); err != nil {
		t.Fatalf("the snapshot that does not restore was not kept aside: %v", err)
	}
}

func TestRestoreCheck_RefusesWhenNoSnapshotTheLogReachesRestores(t *testing.T) {
	t.Run("the log starts after the older snapshot", func(t *testing.T) {
		raftDir := t.TempDir()
		good := addSnapshot(t, raftDir, 100, nil)
		bad := addSnapshot(t, raftDir, 200, undecodable)
		_, _, _, err := restoreCheck(raftDir, []logstore.SnapshotCheck{good, bad}, 150, false)
		var de *DamageError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), "log starts at entry 150") || !strings.Contains(err.Error(), "restore this node from its peers") {
			t.Fatalf("restoreCheck = %v; want damage naming the log's start and the way back", err)
		}
		if _, err := os.Stat(filepath.Join(raftDir, "snapshots", bad.ID)); err != nil {
			t.Fatalf("a refused start moved a snapshot: %v", err)
		}
	})
	t.Run("no snapshot restores", func(t *testing.T) {
		raftDir := t.TempDir()
		bad := addSnapshot(t, raftDir, 200, undecodable)
		_, _, _, err := restoreCheck(raftDir, []logstore.SnapshotCheck{bad}, 101, false)
		if err == nil || !strings.Contains(err.Error(), "nor does any older snapshot") {
			t.Fatalf("restoreCheck = %v", err)
		}
	})
}

func TestRestoreCheck_OfflineRestoresEverySnapshot(t *testing.T) {
	raftDir := t.TempDir()
	good := addSnapshot(t, raftDir, 100, nil)
	_, lines, _, err := restoreCheck(raftDir, []logstore.SnapshotCheck{good}, 101, true)
	if err != nil || !strings.Contains(lines, "snapshots/"+good.ID+": restores (") {
		t.Fatalf("restoreCheck = %q, %v", lines, err)
	}
	bad := addSnapshot(t, raftDir, 200, undecodable)
	_, _, _, err = restoreCheck(raftDir, []logstore.SnapshotCheck{good, bad}, 101, true)
	var de *DamageError
	if !errors.As(err, &de) || !strings.Contains(de.Path, bad.ID) || !strings.Contains(err.Error(), "does not restore") {
		t.Fatalf("restoreCheck = %v; want damage naming %s", err, bad.ID)
	}
}

// garbage persists bytes that are not a snapshot.
type garbage struct{}

func (garbage) Persist(w io.Writer) error { _, err := w.Write(undecodable); return err }
func (garbage) Release()                  {}

// recordingSink is a snapshot sink that says whether it was kept.
type recordingSink struct {
	strings.Builder
	closed, cancelled bool
}

func (s *recordingSink) ID() string    { return "test" }
func (s *recordingSink) Close() error  { s.closed = true; return nil }
func (s *recordingSink) Cancel() error { s.cancelled = true; return nil }

func TestPersist_ASnapshotThatDoesNotReadBackIsNotKept(t *testing.T) {
	sink := &recordingSink{}
	err := (&fsmSnapshot{s: garbage{}}).Persist(sink)
	if err == nil || !strings.Contains(err.Error(), "does not read back") || !sink.cancelled || sink.closed {
		t.Fatalf("Persist = %v, cancelled %v, closed %v; want an error and the sink cancelled", err, sink.cancelled, sink.closed)
	}
	sink = &recordingSink{}
	if err := (&fsmSnapshot{s: fsm.New(fsm.Options{}).Snapshot()}).Persist(sink); err != nil || !sink.closed || sink.cancelled {
		t.Fatalf("Persist of a real state = %v, closed %v", err, sink.closed)
	}
}

// restoreAtStart installs the state the start's check loaded when raft
// starts from that snapshot, and reads the snapshot raft starts from
// otherwise.
func TestRestoreAtStart_TheSnapshotRaftStartsFrom(t *testing.T) {
	withSession := stateWithSession(t, "s1")
	raftDir := t.TempDir()
	fs, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 3, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	sink, err := fs.Create(raft.SnapshotVersionMax, 1, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := withSession.Snapshot().Persist(sink); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}

	f := fsm.New(fsm.Options{})
	if err := restoreAtStart(f, fs, nil); err != nil {
		t.Fatal(err)
	}
	if f.State().Session("s1") == nil {
		t.Fatal("read from the snapshot raft starts from: no session s1")
	}

	empty, err := fsm.LoadSnapshot(bytes.NewReader(snapshotOf(t, fsm.New(fsm.Options{}))))
	if err != nil {
		t.Fatal(err)
	}
	f = fsm.New(fsm.Options{})
	if err := restoreAtStart(f, fs, &loadedSnapshot{ID: "another", State: empty}); err != nil {
		t.Fatal(err)
	}
	if f.State().Session("s1") == nil {
		t.Fatal("a loaded state of another snapshot was installed")
	}

	// Told it loaded raft's snapshot, it installs what it loaded (here
	// another state, to tell the two apart) and reads no file.
	loaded, err := fsm.LoadSnapshot(bytes.NewReader(snapshotOf(t, stateWithSession(t, "s2"))))
	if err != nil {
		t.Fatal(err)
	}
	f = fsm.New(fsm.Options{})
	if err := restoreAtStart(f, fs, &loadedSnapshot{ID: sink.ID(), State: loaded}); err != nil {
		t.Fatal(err)
	}
	if f.State().Session("s2") == nil || f.State().Session("s1") != nil {
		t.Fatal("the loaded state was not the one installed")
	}
}

func stateWithSession(t *testing.T, id string) *fsm.FSM {
	t.Helper()
	f := fsm.New(fsm.Options{})
	data, err := fsm.Encode(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id, MessageId: "m1", Message: "hello"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := f.ApplyEntry(1, data); res.Err != nil {
		t.Fatal(res.Err)
	}
	return f
}

func snapshotOf(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := f.Snapshot().Persist(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
