package cluster

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/dexhq/dex/fsm"
)

// raftFSM adapts the Dex state machine to raft.FSM.
type raftFSM struct {
	f   *fsm.FSM
	obs ApplyObserver // nil: no metrics
}

var _ raft.BatchingFSM = (*raftFSM)(nil)

// Apply hands a committed command entry to the state machine. raft calls it
// only for LogCommand entries; it returns an *fsm.Result.
func (r *raftFSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	return r.applyBatch([]fsm.Entry{{Index: l.Index, Data: l.Data}})[0]
}

// ApplyBatch hands raft's batch of committed entries to the state machine in
// one go, so the batch shares one write transaction. Configuration entries
// are raft's own: their result is nil.
func (r *raftFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	entries := make([]fsm.Entry, 0, len(logs))
	at := make([]int, 0, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			entries = append(entries, fsm.Entry{Index: l.Index, Data: l.Data})
			at = append(at, i)
		}
	}
	if len(entries) == 0 {
		return out
	}
	for j, res := range r.applyBatch(entries) {
		out[at[j]] = res
	}
	return out
}

// Snapshot captures the state. A halted state machine refuses: a snapshot
// would mark the entry it could not apply as applied.
func (r *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := r.f.Halted(); err != nil {
		return nil, fmt.Errorf("no snapshot of a halted state machine: %w", err)
	}
	return &fsmSnapshot{s: r.f.Snapshot()}, nil
}

// Restore replaces the state with a snapshot's.
func (r *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := r.f.Restore(rc); err != nil {
		return err
	}
	r.f.NotifyRestored()
	return nil
}

type fsmSnapshot struct {
	s persister
}

// SnapshotNotKept begins the error (and so the log line) of a snapshot
// that was cancelled because it did not read back.
const SnapshotNotKept = "the snapshot does not read back, so it is not kept"

// persister is what a snapshot of the state machine does (*fsm.Snapshot).
type persister interface {
	Persist(io.Writer) error
	Release()
}

// Persist writes the snapshot and reads it back as it goes: every record is
// decoded by the restore's own decoder before the snapshot is kept. One that
// does not decode is cancelled, so raft keeps the previous snapshot and the
// log it would otherwise have compacted.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	pr, pw := io.Pipe()
	checked := make(chan error, 1)
	go func() {
		_, err := fsm.CheckSnapshot(pr)
		pr.CloseWithError(err) // a failed check stops the writer too
		checked <- err
	}()
	err := s.s.Persist(io.MultiWriter(sink, pw))
	pw.CloseWithError(err) // nil: the checker reads to the end
	if cerr := <-checked; cerr != nil && (err == nil || errors.Is(err, cerr)) {
		err = fmt.Errorf("%s: %w", SnapshotNotKept, cerr)
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.s.Release() }
