package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
)

// restoreTimeout bounds raft's user-snapshot restore: copying the snapshot,
// restoring it and committing an entry after it (which needs a majority to
// have installed it).
const restoreTimeout = 2 * time.Minute

// SavedSnapshot is a snapshot of a partition's whole state taken on its
// leader.
type SavedSnapshot struct {
	Index, Term uint64
	Size        int64
	io.ReadCloser
}

// SaveSnapshot takes a snapshot of this node's partition on its leader
// through raft (after a barrier, so it holds everything committed so far)
// and opens it.
func (n *Node) SaveSnapshot() (*SavedSnapshot, error) {
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	var err error
	for try := 0; try < 3; try++ {
		if err = n.raft.Barrier(10 * time.Second).Error(); err != nil {
			break
		}
		f := n.raft.Snapshot()
		if err = f.Error(); errors.Is(err, raft.ErrNothingNewToSnapshot) {
			continue // another snapshot took this index: barrier again
		}
		if err != nil {
			break
		}
		meta, rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("open the snapshot: %w", err)
		}
		return &SavedSnapshot{Index: meta.Index, Term: meta.Term, Size: meta.Size, ReadCloser: rc}, nil
	}
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return nil, n.notLeader()
	}
	return nil, fmt.Errorf("take a snapshot: %w", err)
}

// restoreReq asks the leadership loop to restore a snapshot.
type restoreReq struct {
	payload io.Reader
	index   uint64
	err     error
	done    chan struct{}
}

// RestoreSnapshot replaces the whole replicated state of this node's
// partition with a state snapshot (fsm.Snapshot.Persist's format, already
// verified by the caller, of the same partition), through raft's
// user-snapshot restore on the leader; followers install it from the
// leader. The partition keeps the cluster id and node addresses it holds
// (partition 0 alone holds them) and an epoch no lower than its own
// (fsm.Adopt); the other partitions are not touched. The leader services stop first, so nothing built
// on the old state proposes on the new one, and the leadership is then
// established again on the restored state: a new epoch, the broker and the
// attempt deadlines rebuilt from it. It returns once that is done.
func (n *Node) RestoreSnapshot(ctx context.Context, payload io.Reader, index uint64) (epoch uint64, err error) {
	if n.raft.State() != raft.Leader {
		return 0, n.notLeader()
	}
	req := &restoreReq{payload: payload, index: index, done: make(chan struct{})}
	select {
	case n.restoreCh <- req:
	case <-n.shutdownCh:
		return 0, raft.ErrRaftShutdown
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	<-req.done
	if req.err != nil {
		return 0, req.err
	}
	for {
		if e := n.Epoch(); e != 0 {
			return e, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the state was restored, but leadership was not established on it yet: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// restore runs in the leadership loop with the leader services stopped.
func (n *Node) restore(req *restoreReq) error {
	tmp, err := os.CreateTemp(n.cfg.DataDir, "restore-*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	if err := fsm.Adopt(req.payload, tmp, n.fsm.State()); err != nil {
		return err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: req.index, Term: n.raft.CurrentTerm(), Size: size}
	if err := n.raft.Restore(meta, tmp, restoreTimeout); err != nil {
		// A leadership moving (the balancer's transfer) leaves the state
		// as it was: the caller sends the backup to the next leader.
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			return n.notLeader()
		}
		return fmt.Errorf("raft restore: %w", err)
	}
	n.log.Info("state restored from a backup", zap.Uint64("backup_index", req.index), zap.Uint64("raft_index", n.raft.LastIndex()))
	return nil
}
