package fsm

import (
	"io"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// The snapshot codec (format, versions and their upgrades) is the store's;
// these are the state machine's face of it.

// Snapshot is a point-in-time copy of the state, cheap to take: the store's
// read transaction is immutable.
type Snapshot struct {
	tx *store.Txn
}

// Snapshot captures the state now.
func (f *FSM) Snapshot() *Snapshot {
	return &Snapshot{tx: f.db().Txn(false)}
}

// Persist writes the snapshot: a header, then one length-delimited record per
// object, tables in the store's registry order and objects in index order,
// so two equal states write equal bytes.
func (s *Snapshot) Persist(w io.Writer) error { return store.Persist(w, s.tx) }

// Release frees the snapshot.
func (s *Snapshot) Release() {}

// ErrBadSnapshot is returned for a snapshot that is not Dex's or is damaged.
var ErrBadSnapshot = store.ErrBadSnapshot

// MaxRecordBytes bounds one record of a snapshot or a backup as protobuf
// bounds any message (2 GiB); see store.MaxRecordBytes.
const MaxRecordBytes = store.MaxRecordBytes

// SnapshotSummary is what a check of a snapshot read.
type SnapshotSummary = store.SnapshotSummary

// CheckSnapshot decodes every record of a snapshot with the decoder a
// restore runs, without building the state: a snapshot it passes restores
// record for record. It reads r to the end.
func CheckSnapshot(r io.Reader) (SnapshotSummary, error) { return store.CheckSnapshot(r) }

// SnapshotMeta reads the meta record a state snapshot opens with and nothing
// after it: the cluster the state belongs to, its dispatch epoch and applied
// index. A backup's own cluster id is this one, whatever its file header
// says.
func SnapshotMeta(r io.Reader) (*fsmpb.ClusterMeta, error) { return store.SnapshotMeta(r) }

// Restore replaces the whole state with a snapshot's. On error the state is
// left as it was. A snapshot written before the tool catalog existed has its
// catalog rebuilt from its Workers.
func (f *FSM) Restore(r io.Reader) error {
	l, err := LoadSnapshot(r)
	if err != nil {
		return err
	}
	f.Install(l)
	return nil
}

// Loaded is a snapshot read into a state of its own, not yet in use: a node
// that starts loads its newest snapshot once, as the check that it
// restores, then installs what it loaded.
type Loaded struct {
	db *store.DB
}

// LoadSnapshot reads a snapshot as Restore does, without touching any
// state machine.
func LoadSnapshot(r io.Reader) (*Loaded, error) {
	db, err := store.Load(r, routing, rebuildCatalog)
	if err != nil {
		return nil, err
	}
	return &Loaded{db: db}, nil
}

// Install replaces the whole state with a loaded one, which becomes f's:
// install a Loaded once.
func (f *FSM) Install(l *Loaded) {
	f.mu.Lock()
	old := f.cur.Swap(l.db)
	f.halted.Store(nil)
	f.mu.Unlock()
	old.Abandon()
}
