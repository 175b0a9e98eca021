package cluster

import (
	"errors"

	"github.com/dexhq/dex/cluster/internal/logstore"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// writeFailed names a write the disk refused for lack of space and, once
// the node runs, stops it: raft cannot go on without its log and its term,
// and raft-wal does not retry a segment it failed to create.
func (n *Node) writeFailed(err error) error {
	err = logstore.DiskFull(n.cfg.DataDir, err)
	var full *DiskFullError
	if !errors.As(err, &full) || !n.running.Load() {
		return err
	}
	n.fullOnce.Do(func() {
		n.log.Error("stopping: the data dir is full", zap.Error(err))
		switch {
		case n.cfg.OnDiskFull != nil:
			n.cfg.OnDiskFull(err)
		case n.cfg.OnHalt != nil:
			n.cfg.OnHalt(err)
		}
	})
	return err
}

// stableStore is raft's stable store (the term and the vote) with its
// writes' errors passed through written: raft panics when it cannot save
// its term, so a full disk has to be named before raft sees the error.
type stableStore struct {
	raft.StableStore
	written func(error) error
}

func (s stableStore) Set(key, val []byte) error {
	return s.written(s.StableStore.Set(key, val))
}

func (s stableStore) SetUint64(key []byte, val uint64) error {
	return s.written(s.StableStore.SetUint64(key, val))
}
