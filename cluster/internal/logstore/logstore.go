package logstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	hclog "github.com/hashicorp/go-hclog"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/migrate"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// The raft log lives in raft/wal: hashicorp/raft-wal's segment files, where
// an append is one write and one fdatasync (bbolt's commit took two, before
// raft could replicate the entry). raft.db keeps the stable store: the term,
// the vote and Dex's own keys. A data dir written before the WAL has its log
// in raft.db; the first start copies it into raft/wal (see MigrateBoltLog).
const (
	walDirName  = "wal"
	WALMetaFile = "wal-meta.db"
	// copyBatchBytes bounds one append while a log is copied.
	copyBatchBytes = 4 << 20
)

func WALDir(raftDir string) string { return filepath.Join(raftDir, walDirName) }

// OpenWAL checks wal-meta.db (a bolt file) like raft.db, then opens the
// segment files. raft-wal takes a damaged last write batch of the open
// segment for a write cut by a crash and drops it; what Dex stored before
// that is guarded by the stored-up-to mark (CheckedLogStore). failed, when
// set, hears the writes raft-wal makes on its own that fail (walFS).
func OpenWAL(dir, dataDir string, hl hclog.Logger, failed func(error)) (w *WALStore, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			w, err = nil, &DamageError{Path: dir, Reason: fmt.Sprintf("is damaged: %v", r)}
		}
	}()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	metaPath := filepath.Join(dir, WALMetaFile)
	if _, err := os.Stat(metaPath); err == nil {
		if _, err := CheckBoltFile(metaPath); err != nil {
			return nil, err
		}
		if err := CheckStore(metaPath, dataDir); err != nil {
			return nil, err
		}
	}
	meta := &metadb.BoltMetaDB{}
	ahead := newStartReads()
	inner, err := wal.Open(dir, wal.WithLogger(hl), wal.WithSegmentSize(walSegmentSize),
		wal.WithMetaStore(walMeta{BoltMetaDB: meta, failed: failed}),
		wal.WithSegmentFiler(segment.NewFiler(dir, walFS{FS: walfs.New(), failed: failed, ahead: ahead})))
	if err != nil {
		ahead.end()
		meta.Close()
		if IsDiskFull(err) {
			return nil, fmt.Errorf("open %s: %w", dir, err)
		}
		return nil, &DamageError{Path: dir, Reason: fmt.Sprintf("is damaged: %v", err)}
	}
	return &WALStore{WAL: inner, meta: meta, ahead: ahead}, nil
}

// WALStore closes the WAL's meta store too: wal.WAL.Close leaves it open,
// and with it the file lock a restart in the same process needs.
type WALStore struct {
	*wal.WAL
	meta  *metadb.BoltMetaDB
	ahead *startReads
}

// StartChecked ends the reads ahead of a start (startReads): call it once
// the log has been read back, before raft runs.
func (w *WALStore) StartChecked() { w.ahead.end() }

// walFS is raft-wal's file system, except for a new segment it could not
// create: raft-wal makes the next segment on its own when the open one is
// full and only logs a failure, so walFS reports it; and it removes the file
// left behind, which raft-wal would otherwise fail to create again (it
// creates segments exclusively) or reopen without its preallocated space.
type walFS struct {
	*walfs.FS
	failed func(error)
	ahead  *startReads
}

// OpenReader and OpenWriter open the segments a start reads, through
// windows read ahead while the start lasts.
func (f walFS) OpenReader(dir, name string) (types.ReadableFile, error) {
	r, err := f.FS.OpenReader(dir, name)
	if err != nil {
		return r, err
	}
	if w := f.ahead.track(r); w != nil {
		return aheadReader{ReadableFile: r, w: w}, nil
	}
	return r, nil
}

func (f walFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	wf, err := f.FS.OpenWriter(dir, name)
	if err != nil {
		return wf, err
	}
	if w := f.ahead.track(wf); w != nil {
		return aheadWriter{WritableFile: wf, w: w}, nil
	}
	return wf, nil
}

func (f walFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	w, err := f.FS.Create(dir, name, size)
	if err != nil {
		if !errors.Is(err, os.ErrExist) {
			os.Remove(filepath.Join(dir, name))
		}
		err = fmt.Errorf("create segment %s: %w", name, err)
		if f.failed != nil {
			f.failed(err)
		}
	}
	return w, err
}

// walMeta reports a failed commit of wal-meta.db, which raft-wal makes on
// its own when it starts the next segment.
type walMeta struct {
	*metadb.BoltMetaDB
	failed func(error)
}

func (m walMeta) CommitState(s types.PersistentState) error {
	err := m.BoltMetaDB.CommitState(s)
	if err != nil {
		err = fmt.Errorf("commit %s: %w", WALMetaFile, err)
		if m.failed != nil {
			m.failed(err)
		}
	}
	return err
}

func (w *WALStore) Close() error {
	w.ahead.end()
	err := w.WAL.Close()
	if merr := w.meta.Close(); err == nil {
		err = merr
	}
	return err
}

// MigrateBoltLog moves a log kept in raft.db (a data dir from before the
// WAL) into raft/wal. The copy is made in wal.tmp and renamed into place
// once complete, so a crash leaves either no WAL (the next start copies
// again) or a whole one; only then are the entries dropped from raft.db.
func MigrateBoltLog(store *raftboltdb.BoltStore, raftDir, dataDir string, hl hclog.Logger) error {
	last, err := store.LastIndex()
	if err != nil {
		return &DamageError{Path: filepath.Join(raftDir, "raft.db"), Reason: fmt.Sprintf("is damaged: its last log index cannot be read: %v", err)}
	}
	if last == 0 {
		return nil
	}
	first, err := store.FirstIndex()
	if err != nil {
		return &DamageError{Path: filepath.Join(raftDir, "raft.db"), Reason: fmt.Sprintf("is damaged: its first log index cannot be read: %v", err)}
	}
	dir := WALDir(raftDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// What is copied must be what was written.
		old, err := NewCheckedLogStore(store, store, filepath.Join(raftDir, "raft.db"), true)
		if err != nil {
			return err
		}
		if _, err := old.VerifyLog(); err != nil {
			return err
		}
		hl.Info("moving the raft log from raft.db into the WAL", "first", first, "last", last)
		tmp := dir + ".tmp"
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("remove %s: %w", tmp, err)
		}
		w, err := OpenWAL(tmp, dataDir, hl, nil)
		if err != nil {
			return err
		}
		err = migrate.CopyLogs(context.Background(), w, store, copyBatchBytes, nil)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("copy the raft log from raft.db into %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			return fmt.Errorf("move %s into place: %w", tmp, err)
		}
		if err := SyncDir(raftDir); err != nil {
			return err
		}
	}
	// The WAL is whole: the entries in raft.db are a stale copy.
	if err := store.DeleteRange(first, last); err != nil {
		return fmt.Errorf("drop the moved log from raft.db: %w", err)
	}
	hl.Info("the raft log is in the WAL now", "first", first, "last", last)
	return nil
}

func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// OpenWALCopy opens a copy of raftDir's WAL in a temporary directory; done
// closes and removes it. Damage is reported against the node's own WAL.
func OpenWALCopy(raftDir, dataDir string) (w *WALStore, done func(), err error) {
	tmp, err := os.MkdirTemp("", "dex-wal-")
	if err != nil {
		return nil, nil, err
	}
	remove := func() { os.RemoveAll(tmp) }
	if err := os.CopyFS(tmp, os.DirFS(WALDir(raftDir))); err != nil {
		remove()
		return nil, nil, fmt.Errorf("copy %s to %s to check it: %w", WALDir(raftDir), tmp, err)
	}
	w, err = OpenWAL(tmp, dataDir, hclog.NewNullLogger(), nil)
	if err != nil {
		remove()
		var d *DamageError
		if errors.As(err, &d) {
			d.Path = strings.Replace(d.Path, tmp, WALDir(raftDir), 1)
			d.Reason = strings.ReplaceAll(d.Reason, tmp, WALDir(raftDir))
		}
		return nil, nil, err
	}
	return w, func() { w.Close(); remove() }, nil
}
