package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/dexhq/dex/cluster/internal/logstore"
	"github.com/dexhq/dex/fsm"
)

// StateDigest rebuilds a stopped node's state machine offline, from its
// newest snapshot at or below index and its log entries up to index, and
// returns the SHA-256 of the state's snapshot bytes. Two nodes that applied
// the same committed entries give the same digest at the same index: the
// soak compares them (nothing is written to the data dir).
func StateDigest(dataDir string, index uint64) (string, error) {
	raftDir := filepath.Join(dataDir, "raft")
	path := filepath.Join(raftDir, "raft.db")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("data dir %s has no raft store (%v)", dataDir, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{Timeout: time.Second, ReadOnly: true}})
	if errors.Is(err, bolt.ErrTimeout) {
		return "", fmt.Errorf("data dir %s is in use: stop the node first", dataDir)
	}
	if err != nil {
		return "", err
	}
	defer store.Close()
	var raw raft.LogStore = store
	if _, err := os.Stat(logstore.WALDir(raftDir)); err == nil {
		w, done, err := logstore.OpenWALCopy(raftDir, dataDir)
		if err != nil {
			return "", err
		}
		defer done()
		raw = w
	}
	logs, err := logstore.NewCheckedLogStore(raw, store, path, true)
	if err != nil {
		return "", err
	}
	f := fsm.New(fsm.Options{})
	from := uint64(1)
	snaps, err := raft.NewFileSnapshotStore(raftDir, 2, io.Discard)
	if err != nil {
		return "", err
	}
	metas, err := snaps.List()
	if err != nil {
		return "", err
	}
	for _, m := range metas { // newest first
		if m.Index > index {
			continue
		}
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			return "", err
		}
		err = f.Restore(rc)
		rc.Close()
		if err != nil {
			return "", fmt.Errorf("snapshot %s: %w", m.ID, err)
		}
		from = m.Index + 1
		break
	}
	if first, err := raw.FirstIndex(); err == nil && first > from {
		return "", fmt.Errorf("%s: no snapshot at or below index %d and the log starts at %d", dataDir, index, first)
	}
	var batch []fsm.Entry
	for i := from; i <= index; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return "", fmt.Errorf("%s: log entry %d: %w", dataDir, i, err)
		}
		if l.Type == raft.LogCommand {
			batch = append(batch, fsm.Entry{Index: l.Index, Data: l.Data})
		}
		if len(batch) == 256 || (i == index && len(batch) > 0) {
			f.ApplyBatch(batch)
			batch = batch[:0]
		}
	}
	if err := f.Halted(); err != nil {
		return "", err
	}
	h := sha256.New()
	s := f.Snapshot()
	defer s.Release()
	if err := s.Persist(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
