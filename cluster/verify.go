package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// openCheckedLog wraps the opened store's log with checksums and, before raft
// reads anything, reads back every log entry and every snapshot: damage is
// refused at start, before the node serves or votes.
func openCheckedLog(store *raftboltdb.BoltStore, raftDir string, onDamage func(error)) (*CheckedLogStore, error) {
	path := filepath.Join(raftDir, "raft.db")
	hasState, err := hasRaftState(store, store)
	if err != nil {
		return nil, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged: its raft state cannot be read: %v", err)}
	}
	logs, err := NewCheckedLogStore(store, store, path, false)
	if err != nil {
		return nil, err
	}
	if _, err := logs.VerifyLog(); err != nil {
		return nil, err
	}
	first, err := store.FirstIndex()
	if err != nil {
		return nil, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged: its first log index cannot be read: %v", err)}
	}
	if _, err := checkSnapshots(raftDir, first, hasState); err != nil {
		return nil, err
	}
	logs.OnDamage = onDamage
	return logs, nil
}

// onDamage stops the node on a log entry that fails its checksum while it
// runs: it must neither apply, serve nor replicate it.
func (n *Node) onDamage(err error) {
	n.log.Error("stopping: the raft log is damaged", zap.Error(err))
	switch {
	case n.cfg.OnDamage != nil:
		n.cfg.OnDamage(err)
	case n.cfg.OnHalt != nil:
		n.cfg.OnHalt(err)
	}
}

// VerifyDataDir checks a stopped node's store offline: the bolt file's meta
// pages and every page, every log entry's checksum and every snapshot's
// CRC64. It returns one line per thing checked and the first damage found.
func VerifyDataDir(dataDir string) (checked []string, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &DamageError{Path: filepath.Join(dataDir, "raft", "raft.db"), Reason: fmt.Sprintf("is damaged: %v", r)}
		}
	}()
	raw, err := os.ReadFile(filepath.Join(dataDir, identityFile))
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not a Dex data dir: %v", dataDir, err)
	}
	var ident Identity
	if err := json.Unmarshal(raw, &ident); err != nil || ident.NodeID == "" {
		return nil, fmt.Errorf("data dir %s is not a Dex data dir (%s is damaged)", dataDir, identityFile)
	}
	checked = append(checked, fmt.Sprintf("%s: node %s", identityFile, ident.NodeID))

	raftDir := filepath.Join(dataDir, "raft")
	path := filepath.Join(raftDir, "raft.db")
	if _, err := os.Stat(path); err != nil {
		return checked, fmt.Errorf("data dir %s has no raft store (%v)", dataDir, err)
	}
	meta, err := checkBoltFile(path)
	if err != nil {
		return checked, err
	}
	checked = append(checked, fmt.Sprintf("raft.db: both bolt meta pages intact (page size %d, %d pages, transaction %d)", meta.pageSize, meta.pgid, meta.txid))
	if err := checkStore(path, dataDir); err != nil {
		return checked, err
	}
	checked = append(checked, "raft.db: every bolt page reachable and consistent")

	store, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{Timeout: time.Second, ReadOnly: true}})
	if errors.Is(err, bolt.ErrTimeout) {
		return checked, fmt.Errorf("data dir %s is in use by another process (%s is locked): stop the node first", dataDir, path)
	}
	if err != nil {
		return checked, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged or not a raft store: %v", err)}
	}
	defer store.Close()
	hasState, err := hasRaftState(store, store)
	if err != nil {
		return checked, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged: its raft state cannot be read: %v", err)}
	}
	logs, err := NewCheckedLogStore(store, store, path, true)
	if err != nil {
		return checked, err
	}
	count, err := logs.VerifyLog()
	if err != nil {
		return checked, err
	}
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	switch {
	case count == 0:
		checked = append(checked, "raft.db: the log is empty")
	case logs.ChecksumsFrom() <= first:
		checked = append(checked, fmt.Sprintf("raft.db: %d log entries (%d..%d), every checksum matches", count, first, last))
	default:
		checked = append(checked, fmt.Sprintf("raft.db: %d log entries (%d..%d), every checksum from entry %d on matches (older entries predate checksums)", count, first, last, logs.ChecksumsFrom()))
	}
	snaps, err := checkSnapshots(raftDir, first, hasState)
	for _, s := range snaps {
		checked = append(checked, fmt.Sprintf("snapshots/%s: up to entry %d, %d bytes, CRC64 matches", s.ID, s.Index, s.Size))
	}
	if err != nil {
		return checked, err
	}
	if len(snaps) == 0 {
		checked = append(checked, "snapshots: none, and none needed")
	}
	return checked, nil
}
