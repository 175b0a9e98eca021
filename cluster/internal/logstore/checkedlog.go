package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Every log entry Dex writes carries a checksum in raft.Log.Extensions, in an
// envelope the wrapper adds on write and strips on read, so raft, the peers
// and the state machine never see it (peers compute their own):
//
//	"DX" | version 1 | CRC32C (big endian, 4 bytes) | the entry's own Extensions
//
// The CRC32C covers the index, term, type, data, the entry's own extensions
// and its AppendedAt time, so a flipped or edited byte anywhere in what raft
// reads back is found. Extensions is a field raft-boltdb and raft-wal both
// store, so neither format changes and an older data dir still opens.
//
// Entries written before the wrapper existed have no envelope. The first
// start with the wrapper records in the stable store the first index it will
// write (checksumsFromKey); an entry below it without an envelope is an
// older entry and is read as before, an entry at or above it without one is
// damaged. Dex never sets Extensions itself, so anything else there is
// damage too.
const (
	envelopeVersion = 1
	envelopeLen     = 7
)

var (
	envelopeMagic    = [2]byte{'D', 'X'}
	crc32c           = crc32.MakeTable(crc32.Castagnoli)
	checksumsFromKey = []byte("dex_log_checksums_from")
	storedUpToKey    = []byte("dex_log_stored_up_to")
)

// DamageError is a log entry (or a store) whose bytes are not what was
// written. The node must stop: serving or voting on it could diverge from
// its peers.
type DamageError struct {
	Path   string // the file the entry was read from
	Index  uint64 // the entry; 0 when the damage is not in one entry
	Reason string // what is wrong, starting with a verb: "is truncated…"
}

func (e *DamageError) Error() string {
	where := e.Path
	if e.Index != 0 {
		where = fmt.Sprintf("raft log entry %d in %s", e.Index, e.Path)
	}
	return fmt.Sprintf("%s %s; restore this node from its peers (docs/operating.md)", where, e.Reason)
}

// ChecksumStore is the stable store the first checksummed index is kept in.
type ChecksumStore interface {
	GetUint64(key []byte) (uint64, error)
	SetUint64(key []byte, val uint64) error
}

// CheckedLogStore wraps a raft.LogStore: StoreLogs adds a checksum to every
// entry, GetLog verifies it. A mismatch calls OnDamage (which stops the
// node) before GetLog returns the error.
type CheckedLogStore struct {
	raft.LogStore
	path   string
	from   uint64 // entries from this index on must carry a checksum
	stable ChecksumStore

	markMu sync.Mutex
	mark   uint64 // the stored-up-to mark, as last written
	// OnDamage is called with the *DamageError before GetLog returns it.
	OnDamage func(error)
	// OnWriteError, when set, is given every failed write (of entries and
	// of the mark) and returns the error to pass on.
	OnWriteError func(error) error
}

// written passes a write's error through OnWriteError.
func (c *CheckedLogStore) written(err error) error {
	if err != nil && c.OnWriteError != nil {
		return c.OnWriteError(err)
	}
	return err
}

// NewCheckedLogStore wraps logs, whose entries live in the file path (named
// in errors). On a writable store it records, once, the first index that
// will carry a checksum; readOnly leaves the store untouched.
func NewCheckedLogStore(logs raft.LogStore, stable ChecksumStore, path string, readOnly bool) (*CheckedLogStore, error) {
	c := &CheckedLogStore{LogStore: logs, path: path, stable: stable}
	mark, err := stable.GetUint64(storedUpToKey)
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return nil, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged: the stored-up-to mark cannot be read: %v", err)}
	}
	c.mark = mark
	from, err := stable.GetUint64(checksumsFromKey)
	switch {
	case err == nil && from != 0:
		c.from = from
		return c, nil
	case err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound):
		return nil, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged: the first checksummed log index cannot be read: %v", err)}
	}
	last, err := logs.LastIndex()
	if err != nil {
		return nil, &DamageError{Path: path, Reason: fmt.Sprintf("is damaged: its last log index cannot be read: %v", err)}
	}
	c.from = last + 1
	if !readOnly {
		if err := stable.SetUint64(checksumsFromKey, c.from); err != nil {
			return nil, fmt.Errorf("record the first checksummed log index in %s: %w", path, err)
		}
	}
	return c, nil
}

// ChecksumsFrom is the first index whose entry must carry a checksum.
func (c *CheckedLogStore) ChecksumsFrom() uint64 { return c.from }

// StoreLog stores one entry with its checksum.
func (c *CheckedLogStore) StoreLog(l *raft.Log) error {
	return c.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores entries with their checksums. raft keeps the entries it
// passes, so they are copied rather than changed.
func (c *CheckedLogStore) StoreLogs(logs []*raft.Log) error {
	beforeStoreLogs()
	sealed := make([]raft.Log, len(logs))
	ptrs := make([]*raft.Log, len(logs))
	for i, l := range logs {
		sealed[i] = *l
		sealed[i].Extensions = seal(l)
		ptrs[i] = &sealed[i]
	}
	return c.written(c.LogStore.StoreLogs(ptrs))
}

// GetLog reads an entry and verifies its checksum. raft.ErrLogNotFound is
// returned as is: raft relies on it for compacted entries.
func (c *CheckedLogStore) GetLog(index uint64, l *raft.Log) error {
	err := c.read(index, l)
	if err != nil && !errors.Is(err, raft.ErrLogNotFound) && c.OnDamage != nil {
		c.OnDamage(err)
	}
	return err
}

func (c *CheckedLogStore) read(index uint64, l *raft.Log) error {
	err := c.LogStore.GetLog(index, l)
	switch {
	case errors.Is(err, raft.ErrLogNotFound):
		return err
	case err != nil:
		return &DamageError{Path: c.path, Index: index, Reason: fmt.Sprintf("is damaged: it cannot be decoded: %v", err)}
	}
	return c.open(index, l)
}

// open verifies the entry read for index and strips its envelope.
func (c *CheckedLogStore) open(index uint64, l *raft.Log) error {
	damaged := func(reason string) error { return &DamageError{Path: c.path, Index: index, Reason: reason} }
	if l.Index != index {
		return damaged(fmt.Sprintf("is damaged: it is stored under index %d but says %d", index, l.Index))
	}
	ext := l.Extensions
	if len(ext) == 0 {
		if index >= c.from {
			return damaged(fmt.Sprintf("is damaged: it has no checksum, but every entry from %d on has one", c.from))
		}
		return nil // written before checksums existed
	}
	if len(ext) < envelopeLen || ext[0] != envelopeMagic[0] || ext[1] != envelopeMagic[1] {
		return damaged("is damaged: its checksum envelope is unreadable")
	}
	if ext[2] != envelopeVersion {
		return damaged(fmt.Sprintf("is damaged: its checksum envelope has the unknown version %d", ext[2]))
	}
	stored := binary.BigEndian.Uint32(ext[3:envelopeLen])
	if len(ext) == envelopeLen {
		l.Extensions = nil
	} else {
		l.Extensions = ext[envelopeLen:]
	}
	if sum := entrySum(l); sum != stored {
		return damaged(fmt.Sprintf("is damaged: its checksum is %08x but %08x was stored with it", sum, stored))
	}
	return nil
}

// seal returns the envelope for l: its checksum and its own extensions.
func seal(l *raft.Log) []byte {
	ext := make([]byte, envelopeLen, envelopeLen+len(l.Extensions))
	ext[0], ext[1], ext[2] = envelopeMagic[0], envelopeMagic[1], envelopeVersion
	binary.BigEndian.PutUint32(ext[3:], entrySum(l))
	return append(ext, l.Extensions...)
}

// entrySum is the CRC32C of what raft reads back from an entry.
func entrySum(l *raft.Log) uint32 {
	var hdr [8 + 8 + 1 + 8 + 8 + 8]byte
	binary.BigEndian.PutUint64(hdr[0:], l.Index)
	binary.BigEndian.PutUint64(hdr[8:], l.Term)
	hdr[16] = byte(l.Type)
	binary.BigEndian.PutUint64(hdr[17:], uint64(l.AppendedAt.UnixNano()))
	binary.BigEndian.PutUint64(hdr[25:], uint64(len(l.Data)))
	binary.BigEndian.PutUint64(hdr[33:], uint64(len(l.Extensions)))
	sum := crc32.Update(0, crc32c, hdr[:])
	sum = crc32.Update(sum, crc32c, l.Data)
	return crc32.Update(sum, crc32c, l.Extensions)
}

// VerifyLog reads every entry through the checks of GetLog (without calling
// OnDamage) and returns how many it read and the first damage found.
func (c *CheckedLogStore) VerifyLog() (int, error) {
	first, err := c.LogStore.FirstIndex()
	if err != nil {
		return 0, &DamageError{Path: c.path, Reason: fmt.Sprintf("is damaged: its first log index cannot be read: %v", err)}
	}
	last, err := c.LogStore.LastIndex()
	if err != nil {
		return 0, &DamageError{Path: c.path, Reason: fmt.Sprintf("is damaged: its last log index cannot be read: %v", err)}
	}
	if first == 0 {
		return 0, nil
	}
	// Two halves at once: a start waits for this read. The first damage is
	// the lower half's, if it has one.
	mid := first + (last-first)/2
	var low, high verified
	var wg sync.WaitGroup
	wg.Go(func() { high = c.verifyRange(mid+1, last, first, last) })
	low = c.verifyRange(first, mid, first, last)
	wg.Wait()
	if low.err != nil {
		return low.n, low.err
	}
	return low.n + high.n, high.err
}

// verified is what verifyRange read: how many entries, and the first damage.
type verified struct {
	n   int
	err error
}

// verifyRange reads the entries from..to of the log first..last.
func (c *CheckedLogStore) verifyRange(from, to, first, last uint64) verified {
	n := 0
	for i := from; i <= to; i++ {
		var l raft.Log
		err := c.read(i, &l)
		if errors.Is(err, raft.ErrLogNotFound) {
			return verified{n, &DamageError{Path: c.path, Index: i, Reason: fmt.Sprintf("is missing from the log %d..%d", first, last)}}
		}
		if err != nil {
			return verified{n, err}
		}
		n++
	}
	return verified{n, nil}
}
