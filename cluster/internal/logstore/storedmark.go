package logstore

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// The stored-up-to mark closes the one gap checksums leave: an entry that is
// gone rather than changed. The WAL drops a damaged or cut end of its open
// segment as a write a crash interrupted, which is right for the last
// append (it was never acknowledged) but would hide the loss of entries
// acknowledged long before. So every second the node records, in raft.db,
// the last index the log holds (RecordStoredUpTo); at start a log that ends
// below the mark, with no snapshot covering the gap, is refused as damaged.
// Only a loss within the last second before a crash is indistinguishable
// from a torn write, as in etcd's WAL. raft's own truncation of a
// conflicting tail lowers the mark first (DeleteRange).

// RecordStoredUpTo raises the mark to the log's last index. Every entry up
// to it was synced by the StoreLogs that returned it.
func (c *CheckedLogStore) RecordStoredUpTo() error {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	last, err := c.LogStore.LastIndex()
	if err != nil || last <= c.mark {
		return err
	}
	if err := c.stable.SetUint64(storedUpToKey, last); err != nil {
		return c.written(fmt.Errorf("record the stored-up-to mark: %w", err))
	}
	c.mark = last
	return nil
}

// DeleteRange deletes entries; when it deletes the log's end (a conflicting
// tail, or all of it under an installed snapshot) the mark is lowered first,
// so a later start does not take the deletion for damage.
func (c *CheckedLogStore) DeleteRange(min, max uint64) error {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	last, err := c.LogStore.LastIndex()
	if err != nil {
		return err
	}
	if max >= last && min > 0 && min-1 < c.mark {
		if err := c.stable.SetUint64(storedUpToKey, min-1); err != nil {
			return c.written(fmt.Errorf("lower the stored-up-to mark: %w", err))
		}
		c.mark = min - 1
	}
	return c.written(c.LogStore.DeleteRange(min, max))
}

// CheckStoredUpTo refuses a log that ends below the mark. raft never
// shortens a log below its snapshot except by dropping all of it (under an
// installed snapshot, which lowers the mark first), so only an empty log
// may leave the mark to a snapshot (up to snapshotIndex).
func (c *CheckedLogStore) CheckStoredUpTo(snapshotIndex uint64) error {
	last, err := c.LogStore.LastIndex()
	if err != nil {
		return &DamageError{Path: c.path, Reason: fmt.Sprintf("is damaged: its last log index cannot be read: %v", err)}
	}
	held := last
	if last == 0 {
		held = snapshotIndex
	}
	if held < c.mark {
		return &DamageError{Path: c.path, Reason: fmt.Sprintf("is damaged: it ends at entry %d, but entries up to %d were stored in it (cut or lost)", held, c.mark)}
	}
	return nil
}

// StoredUpTo is the mark as last written.
func (c *CheckedLogStore) StoredUpTo() uint64 {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	return c.mark
}

// IsMonotonic passes on the WAL's answer: raft then drops the whole log
// under an installed snapshot rather than leaving a gap the WAL refuses.
func (c *CheckedLogStore) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
