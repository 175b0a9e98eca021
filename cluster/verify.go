package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/dexhq/dex/cluster/internal/logstore"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// openCheckedLog wraps the WAL's log with checksums and, before raft reads
// anything, reads back every log entry and every snapshot and checks the
// log still reaches the stored-up-to mark: damage is refused at start,
// before the node serves or votes.
//
// A snapshot whose CRC matches must also restore (restoreCheck); note says
// what the node did when its newest one does not. At start (not readOnly)
// loaded is the state of the snapshot raft will start from, if any.
func openCheckedLog(store *raftboltdb.BoltStore, logs raft.LogStore, dir, raftDir string, readOnly bool) (clog *logstore.CheckedLogStore, snaps []logstore.SnapshotCheck, note string, loaded *loadedSnapshot, err error) {
	hasState, err := logstore.HasRaftState(logs, store)
	if err != nil {
		return nil, nil, "", nil, &DamageError{Path: dir, Reason: fmt.Sprintf("is damaged: its raft state cannot be read: %v", err)}
	}
	checked, err := logstore.NewCheckedLogStore(logs, store, dir, readOnly)
	if err != nil {
		return nil, nil, "", nil, err
	}
	if _, err := checked.VerifyLog(); err != nil {
		return nil, nil, "", nil, err
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return nil, nil, "", nil, &DamageError{Path: dir, Reason: fmt.Sprintf("is damaged: its first log index cannot be read: %v", err)}
	}
	snaps, err = logstore.CheckSnapshots(raftDir, first, hasState)
	if err != nil {
		return nil, snaps, "", nil, err
	}
	snaps, note, loaded, err = restoreCheck(raftDir, snaps, first, readOnly)
	if err != nil {
		return nil, snaps, "", nil, err
	}
	var newest uint64
	for _, s := range snaps {
		newest = max(newest, s.Index)
	}
	if err := checked.CheckStoredUpTo(newest); err != nil {
		return nil, snaps, "", nil, err
	}
	return checked, snaps, note, loaded, nil
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
	meta, err := logstore.CheckBoltFile(path)
	if err != nil {
		return checked, err
	}
	checked = append(checked, fmt.Sprintf("raft.db: both bolt meta pages intact (page size %d, %d pages, transaction %d)", meta.PageSize, meta.Pages, meta.TxID))
	if err := logstore.CheckStore(path, dataDir); err != nil {
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

	// The log: in raft/wal, or still in raft.db when no start since the WAL
	// moved it. The WAL is read from a copy: opening it may rewrite a cut
	// last append, which is the next start's to do.
	var logs raft.LogStore = store
	logPath, logName := path, "raft.db"
	if _, err := os.Stat(logstore.WALDir(raftDir)); err == nil {
		meta := filepath.Join(logstore.WALDir(raftDir), logstore.WALMetaFile)
		m, err := logstore.CheckBoltFile(meta)
		if err != nil {
			return checked, err
		}
		if err := logstore.CheckStore(meta, dataDir); err != nil {
			return checked, err
		}
		checked = append(checked, fmt.Sprintf("wal/%s: both bolt meta pages intact, every page consistent (%d pages)", logstore.WALMetaFile, m.Pages))
		w, done, err := logstore.OpenWALCopy(raftDir, dataDir)
		if err != nil {
			return checked, err
		}
		defer done()
		logs, logPath, logName = w, logstore.WALDir(raftDir), "wal"
	}
	clog, snaps, restored, _, err := openCheckedLog(store, logs, logPath, raftDir, true)
	for _, s := range snaps {
		checked = append(checked, fmt.Sprintf("snapshots/%s: up to entry %d, %d bytes, CRC64 matches", s.ID, s.Index, s.Size))
	}
	if restored != "" {
		checked = append(checked, strings.Split(restored, "\n")...)
	}
	if err != nil {
		return checked, err
	}
	first, _ := logs.FirstIndex()
	last, _ := logs.LastIndex()
	count := 0
	if first > 0 {
		count = int(last - first + 1)
	}
	switch {
	case count == 0:
		checked = append(checked, logName+": the log is empty")
	case clog.ChecksumsFrom() <= first:
		checked = append(checked, fmt.Sprintf("%s: %d log entries (%d..%d), every checksum matches", logName, count, first, last))
	default:
		checked = append(checked, fmt.Sprintf("%s: %d log entries (%d..%d), every checksum from entry %d on matches (older entries predate checksums)", logName, count, first, last, clog.ChecksumsFrom()))
	}
	if mark := clog.StoredUpTo(); mark > 0 {
		checked = append(checked, fmt.Sprintf("%s: holds entry %d, the last the node recorded as stored", logName, mark))
	}
	if len(snaps) == 0 {
		checked = append(checked, "snapshots: none, and none needed")
	}
	return checked, nil
}
