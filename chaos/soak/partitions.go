package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/cluster"
)

// The soak on a cluster of several partitions (Options.Partitions,
// docs/design/partitions.md): each partition is a raft group of its own,
// with its own leader, log, snapshots and state. What changes:
//
//   - a fault that strikes the leader strikes the leader of one partition,
//     drawn from the seed (faults.go);
//   - the nodes' states are compared partition by partition, each at the
//     index every node applied in it; after the soak each partition's
//     snapshots are restored offline and each partition must catch up;
//   - a backup holds every partition (cluster/backup/set.go) and is
//     restored, partition by partition, into a scratch cluster of as many;
//   - across partitions only the tool catalog and the Worker registrations
//     are shared, and every backup's partitions must hold the same
//     (catalog.go);
//   - the checker's verdicts are those of one partition; the report gives
//     its figures per partition (check_partitions.go).
//
// The flatness figures of the lifecycle mode are partition 0's: its
// leader's RSS and its newest snapshot (DATA/raft, where partition 0
// keeps its stores as a cluster of one does).

// partitions is the cluster's number of partitions (1 without
// Options.Partitions).
func (s *soaker) partitions() int { return max(s.o.Partitions, 1) }

// DigestSet is one partition's node states compared: each node's digest
// at the index every node had applied.
type DigestSet struct {
	Index   uint64            `json:"index"`
	Digests map[string]string `json:"digests"`
}

// PartitionRestart is one partition of a node restarted after the soak:
// the snapshots it keeps restored offline, the index it came back to
// and, when it did not catch up, why.
type PartitionRestart struct {
	Partition int                       `json:"partition"`
	Snapshots []cluster.SnapshotRestore `json:"snapshots"`
	Index     uint64                    `json:"index,omitempty"`
	Err       string                    `json:"err,omitempty"`
}

// partitionView is a directory that reads as a data dir holding only
// partition k's raft stores (a "raft" link to them), for the offline
// readers that take a data dir (cluster.StateDigest,
// cluster.RestoreSnapshots); partition 0's is the data dir itself. done
// removes the view, not what it links to.
func partitionView(parent, dataDir string, k int) (dir string, done func(), err error) {
	if k == 0 {
		return dataDir, func() {}, nil
	}
	dir, err = os.MkdirTemp(parent, fmt.Sprintf("view-p%d-", k))
	if err != nil {
		return "", nil, err
	}
	if err := os.Symlink(cluster.PartitionRaftDir(dataDir, uint16(k)), filepath.Join(dir, "raft")); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// partitionApplied asks every node for the index it applied in each
// partition: out[i][k] is node i's in partition k.
func (s *soaker) partitionApplied(ctx context.Context) ([][]uint64, error) {
	var out [][]uint64
	for _, n := range s.cluster.Nodes {
		parts, err := s.cluster.PartitionStatus(ctx, n)
		if err != nil {
			return nil, err
		}
		if len(parts) != s.partitions() {
			return nil, fmt.Errorf("%s lists %d partitions, not %d", n.ID, len(parts), s.partitions())
		}
		applied := make([]uint64, len(parts))
		for k, p := range parts {
			applied[k] = p.AppliedIndex
		}
		out = append(out, applied)
	}
	return out, nil
}

// sameApplied is the index every node applied in each partition, or false
// while they differ in one.
func sameApplied(applied [][]uint64) ([]uint64, bool) {
	if len(applied) == 0 {
		return nil, false
	}
	for _, a := range applied[1:] {
		if !slices.Equal(a, applied[0]) {
			return nil, false
		}
	}
	return applied[0], true
}

// partitionDigests waits until every node applied the same index in each
// partition, stops the nodes and rebuilds each node's state of each
// partition at that partition's index from its store.
func (s *soaker) partitionDigests(ctx context.Context) ([]DigestSet, error) {
	var index []uint64
	deadline := time.Now().Add(time.Minute)
	for {
		applied, err := s.partitionApplied(ctx)
		if err == nil {
			var same bool
			if index, same = sameApplied(applied); same {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the nodes' applied indexes never met in every partition: %v (%v)%s", applied, err, s.deadNodes())
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
	s.cluster.StopAll()
	sets := make([]DigestSet, len(index))
	for k := range sets {
		sets[k] = DigestSet{Index: index[k], Digests: map[string]string{}}
		for _, n := range s.cluster.Nodes {
			dir, done, err := partitionView(s.dir, n.DataDir, k)
			if err != nil {
				return sets, err
			}
			d, err := cluster.StateDigest(dir, index[k])
			done()
			if err != nil {
				return sets, fmt.Errorf("node %s, partition %d: %w", n.ID, k, err)
			}
			sets[k].Digests[n.ID] = d
		}
	}
	return sets, nil
}

// restoreSnapshots restores, offline, every snapshot node n keeps: with
// one partition its own; with several each partition's.
func (s *soaker) restoreSnapshots(r *NodeRestart, n *harness.Node) error {
	if s.partitions() == 1 {
		snaps, err := cluster.RestoreSnapshots(n.DataDir)
		r.Snapshots = snaps
		return err
	}
	var errs []error
	for k := range s.partitions() {
		p := PartitionRestart{Partition: k}
		dir, done, err := partitionView(s.dir, n.DataDir, k)
		if err == nil {
			p.Snapshots, err = cluster.RestoreSnapshots(dir)
			done()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", k, err))
		}
		r.Partitions = append(r.Partitions, p)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// catchUpPartitions is catchUp for a cluster of several partitions: every
// started node must apply, in each partition, the index the soak ended
// at in it (want[k]).
func (s *soaker) catchUpPartitions(ctx context.Context, rc *RestartCheck, want []uint64, start time.Time) {
	deadline := start.Add(restartWait)
	for {
		waiting := 0
		for i, n := range s.cluster.Nodes {
			r := &rc.Nodes[i]
			if r.Err != "" || r.Took != 0 {
				continue
			}
			if !n.Running() {
				r.Err = fmt.Sprintf("exited after the restart (%v); its log ends:\n%s", n.ExitErr(), harness.Tail(n.Log(), 8))
				continue
			}
			parts, err := s.cluster.PartitionStatus(ctx, n)
			behind := 0
			for k := range r.Partitions {
				p, at := &r.Partitions[k], uint64(0) // no index to reach when the states were not compared
				if k < len(want) {
					at = want[k]
				}
				if err == nil && k < len(parts) {
					p.Index = parts[k].AppliedIndex
					if p.Index >= at {
						continue
					}
				}
				behind++
				if time.Now().After(deadline) {
					p.Err = fmt.Sprintf("applied index %d after %s, the soak ended at %d (%v)", p.Index, restartWait, at, err)
				}
			}
			if behind == 0 && len(r.Partitions) > 0 {
				r.Index, r.Took = r.Partitions[0].Index, time.Since(start)
				continue
			}
			waiting++
		}
		if waiting == 0 || time.Now().After(deadline) || sleepCtx(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
}
