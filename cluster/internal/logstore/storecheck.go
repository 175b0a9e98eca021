package logstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// bbolt's on-disk meta page (go.etcd.io/bbolt/internal/common): a 16-byte
// page header (id, flags, count, overflow), then the meta: magic, version,
// page size, flags, root bucket (page, sequence), freelist page, high-water
// page id, txid and an FNV-64a checksum of the meta bytes before it. bbolt
// writes it in the machine's byte order.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltMetaFlag     = 0x04
	boltPageHeader   = 16
	boltMetaSumStart = boltPageHeader
	boltMetaSumEnd   = boltPageHeader + 56
	boltMetaEnd      = boltMetaSumEnd + 8
	boltNoFreelist   = ^uint64(0)
)

// BoltMeta is what CheckBoltFile read of a bolt file's current meta page.
type BoltMeta struct {
	PageSize uint32
	root     uint64
	freelist uint64
	Pages    uint64
	TxID     uint64
}

// CheckBoltFile validates a bolt file's two meta pages (raft.db's,
// wal-meta.db's) and its size before bbolt maps it: bbolt trusts them and
// faults (SIGBUS) on a file shorter than they say. A missing file is fine
// (a new store).
func CheckBoltFile(path string) (*BoltMeta, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open raft store %s: %v", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat raft store %s: %v", path, err)
	}
	size := st.Size()
	bad := func(format string, a ...any) error {
		return &DamageError{Path: path, Reason: fmt.Sprintf(format, a...)}
	}
	if size == 0 {
		return nil, bad("is empty (0 bytes)")
	}
	if size < boltMetaEnd {
		return nil, bad("is truncated: %d bytes, not even one bolt meta page", size)
	}
	buf := make([]byte, boltMetaEnd)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("read raft store %s: %v", path, err)
	}
	m0, reason := parseBoltMeta(buf, 0)
	if reason != "" {
		return nil, bad("is damaged: bolt meta page 0 %s", reason)
	}
	ps := int64(m0.PageSize)
	if size < ps+boltMetaEnd {
		return nil, bad("is truncated: %d bytes, its page size is %d and it has 2 meta pages", size, ps)
	}
	if _, err := f.ReadAt(buf, ps); err != nil {
		return nil, fmt.Errorf("read raft store %s: %v", path, err)
	}
	m1, reason := parseBoltMeta(buf, 1)
	if reason != "" {
		return nil, bad("is damaged: bolt meta page 1 %s", reason)
	}
	if m1.PageSize != m0.PageSize {
		return nil, bad("is damaged: its bolt meta pages disagree on the page size (%d, %d)", m0.PageSize, m1.PageSize)
	}
	cur := m0
	if m1.TxID > m0.TxID {
		cur = m1
	}
	for i, m := range []*BoltMeta{m0, m1} {
		if need := int64(m.Pages) * ps; size < need {
			return nil, bad("is truncated: %d bytes, but its bolt meta page %d needs %d", size, i, need)
		}
	}
	return cur, nil
}

// parseBoltMeta checks one meta page; it returns why it is bad, or "".
func parseBoltMeta(b []byte, id uint64) (*BoltMeta, string) {
	ne := binary.NativeEndian
	if got := ne.Uint64(b[0:]); got != id {
		return nil, fmt.Sprintf("has the page id %d", got)
	}
	if ne.Uint16(b[8:])&boltMetaFlag == 0 {
		return nil, "is not marked as a meta page"
	}
	if ne.Uint32(b[16:]) != boltMagic {
		return nil, "has no bolt magic number"
	}
	if v := ne.Uint32(b[20:]); v != boltVersion {
		return nil, fmt.Sprintf("has the unknown version %d", v)
	}
	h := fnv.New64a()
	h.Write(b[boltMetaSumStart:boltMetaSumEnd])
	if sum, stored := h.Sum64(), ne.Uint64(b[boltMetaSumEnd:]); sum != stored {
		return nil, fmt.Sprintf("fails its checksum (%016x, stored %016x)", sum, stored)
	}
	m := &BoltMeta{
		PageSize: ne.Uint32(b[24:]),
		root:     ne.Uint64(b[32:]),
		freelist: ne.Uint64(b[48:]),
		Pages:    ne.Uint64(b[56:]),
		TxID:     ne.Uint64(b[64:]),
	}
	if m.PageSize < 512 || m.PageSize > 1<<20 || m.PageSize&(m.PageSize-1) != 0 {
		return nil, fmt.Sprintf("has the page size %d", m.PageSize)
	}
	if m.root >= m.Pages || (m.freelist >= m.Pages && m.freelist != boltNoFreelist) {
		return nil, fmt.Sprintf("points past its last page %d", m.Pages)
	}
	return m, ""
}

// snapshotMeta is what Dex reads of raft's snapshots/ID/meta.json.
type snapshotMeta struct {
	ID      string
	Index   uint64
	Term    uint64
	Size    int64
	CRC     []byte
	Version int
}

// SnapshotCheck is one verified snapshot.
type SnapshotCheck struct {
	ID    string
	Index uint64
	Size  int64
}

// CheckSnapshots verifies every snapshot in raftDir/snapshots before raft
// reads them (raft itself skips a snapshot whose meta.json is unreadable and
// falls back to an older one on a CRC mismatch, silently), and that they
// cover the log: a log starting after entry 1 needs a snapshot of what came
// before. hasState says the node holds raft state, so the directory must
// exist.
func CheckSnapshots(raftDir string, firstIndex uint64, hasState bool) ([]SnapshotCheck, error) {
	dir := filepath.Join(raftDir, "snapshots")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		if hasState {
			return nil, &DamageError{Path: dir, Reason: "is missing, but this node holds a raft log"}
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshots dir %s: %v", dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") { // not one of raft's unfinished snapshots
			names = append(names, e.Name())
		}
	}
	// Each snapshot's CRC on a core of its own: a start waits for them.
	results := make([]snapshotChecked, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { results[i].c, results[i].err = checkSnapshot(filepath.Join(dir, name)) })
	}
	wg.Wait()
	var checked []SnapshotCheck
	var newest uint64
	for _, r := range results {
		if r.err != nil {
			return checked, r.err
		}
		checked = append(checked, r.c)
		newest = max(newest, r.c.Index)
	}
	if firstIndex > 1 && newest < firstIndex-1 {
		reason := fmt.Sprintf("holds no snapshot, but the log starts at entry %d", firstIndex)
		if len(checked) > 0 {
			reason = fmt.Sprintf("holds snapshots up to entry %d only, but the log starts at entry %d", newest, firstIndex)
		}
		return checked, &DamageError{Path: dir, Reason: reason}
	}
	return checked, nil
}

type snapshotChecked struct {
	c   SnapshotCheck
	err error
}

// checkSnapshot verifies one snapshot: meta.json readable, state.bin of the
// recorded size and CRC64.
func checkSnapshot(dir string) (SnapshotCheck, error) {
	metaPath := filepath.Join(dir, "meta.json")
	raw, err := os.ReadFile(metaPath)
	if err != nil {
		return SnapshotCheck{}, &DamageError{Path: metaPath, Reason: fmt.Sprintf("cannot be read: %v", err)}
	}
	var m snapshotMeta
	if err := json.Unmarshal(raw, &m); err != nil || m.ID != filepath.Base(dir) || len(m.CRC) == 0 {
		return SnapshotCheck{}, &DamageError{Path: metaPath, Reason: "is damaged: it is not the meta of this snapshot"}
	}
	statePath := filepath.Join(dir, "state.bin")
	f, err := os.Open(statePath)
	if err != nil {
		return SnapshotCheck{}, &DamageError{Path: statePath, Reason: fmt.Sprintf("cannot be read: %v", err)}
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	n, err := io.Copy(h, f)
	if err != nil {
		return SnapshotCheck{}, &DamageError{Path: statePath, Reason: fmt.Sprintf("cannot be read: %v", err)}
	}
	if n != m.Size {
		return SnapshotCheck{}, &DamageError{Path: statePath, Reason: fmt.Sprintf("is truncated or extended: %d bytes, meta.json says %d", n, m.Size)}
	}
	if sum := h.Sum(nil); !bytes.Equal(sum, m.CRC) {
		return SnapshotCheck{}, &DamageError{Path: statePath, Reason: fmt.Sprintf("is damaged: its CRC64 is %x but meta.json says %x", sum, m.CRC)}
	}
	return SnapshotCheck{ID: m.ID, Index: m.Index, Size: n}, nil
}

// HasRaftState reports whether the store holds a log or a term.
func HasRaftState(logs raft.LogStore, stable raft.StableStore) (bool, error) {
	last, err := logs.LastIndex()
	if err != nil {
		return false, err
	}
	if last > 0 {
		return true, nil
	}
	term, err := stable.GetUint64(keyCurrentTerm)
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return false, err
	}
	return term > 0, nil
}

// keyCurrentTerm is the stable-store key raft keeps its term under.
var keyCurrentTerm = []byte("CurrentTerm")

// CheckStore verifies every page of an existing raft.db before raft reads it,
// so damage is reported at start rather than as a crash later.
func CheckStore(path, dataDir string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	switch {
	case errors.Is(err, bolt.ErrTimeout):
		return fmt.Errorf("data dir %s is in use by another process (%s is locked)", dataDir, path)
	case err != nil:
		return &DamageError{Path: path, Reason: fmt.Sprintf("is damaged or not a raft store: %v", err)}
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		for cerr := range tx.Check() {
			return &DamageError{Path: path, Reason: "is damaged: " + strings.TrimPrefix(cerr.Error(), "panic: ")}
		}
		return nil
	})
}

// OpenStore opens raft.db with a lock timeout, turning bbolt's errors (and a
// panic on a damaged file) into one clear error.
func OpenStore(path, dataDir string) (s *raftboltdb.BoltStore, err error) {
	// A fault on the mapped file is a panic here, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged: %v", r)}
		}
	}()
	if _, err := CheckBoltFile(path); err != nil {
		return nil, err
	}
	if err := CheckStore(path, dataDir); err != nil {
		return nil, err
	}
	s, err = raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bolt.Options{Timeout: time.Second},
	})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, bolt.ErrTimeout):
		return nil, fmt.Errorf("data dir %s is in use by another process (%s is locked)", dataDir, path)
	case IsDiskFull(err):
		return nil, fmt.Errorf("open %s: %w", path, err)
	default:
		return nil, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged or not a raft store: %v", err)}
	}
}
