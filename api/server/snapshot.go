package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/cluster/backup"
	"github.com/dexhq/dex/fsm"
)

// snapshotChunk is the size of the pieces a backup file travels in, well
// under gRPC's message limit.
const snapshotChunk = 512 << 10

// restoreWait bounds a restore: raft's restore, then the leadership
// established again on the restored state.
const restoreWait = 3 * time.Minute

// SaveSnapshot streams a backup file of the whole state of this node's
// partition, taken on its leader through raft. In a cluster of several
// partitions its header names the partition and their number.
func (a *Admin) SaveSnapshot(_ *dexv1.SaveSnapshotRequest, stream dexv1.AdminService_SaveSnapshotServer) error {
	ctx := stream.Context()
	if err := a.leaderOnly(ctx); err != nil {
		return err
	}
	snap, err := a.node.SaveSnapshot()
	if err != nil {
		return a.toStatus(ctx, err)
	}
	defer snap.Close()
	br := bufio.NewReaderSize(snap, snapshotChunk)
	h, err := backupHeader(snap, br, time.Now())
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := a.namePartition(&h); err != nil {
		return err
	}
	w := bufio.NewWriterSize(chunkSender{stream}, snapshotChunk)
	sum, err := backup.Write(w, h, br)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return status.Errorf(codes.Unavailable, "stream the snapshot: %v", err)
	}
	a.log.Info("backup saved", zap.Int("partition", h.Partition), zap.Uint64("index", h.Index), zap.Uint64("term", h.Term), zap.Int64("bytes", h.Size), zap.String("sha256", sum))
	return nil
}

// partitionCount is the number of partitions of the cluster.
func (a *Admin) partitionCount() int { return max(len(a.partitions), 1) }

// namePartition names, in the header of a backup of a cluster of several
// partitions, the partition it is of and their number. Only partition 0's
// state records the cluster id: another partition's header names the
// cluster this node belongs to.
func (a *Admin) namePartition(h *backup.Header) error {
	n := a.partitionCount()
	if n == 1 {
		return nil // the header of a cluster of one partition is as it always was
	}
	h.Partition, h.Partitions = a.node.Partition(), n
	if h.Partition > 0 {
		if h.ClusterID = a.node.ClusterID(); h.ClusterID == "" {
			return status.Error(codes.Unavailable, "this cluster has no id yet (its first leader is setting it up); retry in a moment")
		}
	}
	return nil
}

// backupHeader makes the header of a backup of snap, whose state br reads
// from its start. The state opens with fsm's magic "DEXSNAP", its version and
// its meta record: the header names the cluster the state itself records.
func backupHeader(snap *cluster.SavedSnapshot, br *bufio.Reader, now time.Time) (backup.Header, error) {
	head, _ := br.Peek(int(min(snap.Size, int64(br.Size()))))
	meta, err := fsm.SnapshotMeta(bytes.NewReader(head))
	if err != nil {
		return backup.Header{}, fmt.Errorf("the snapshot taken does not decode: %w", err)
	}
	return backup.Header{
		Index:        snap.Index,
		Term:         snap.Term,
		ClusterID:    meta.GetClusterId(),
		StateVersion: int(head[7]),
		Size:         snap.Size,
		TakenAtMs:    now.UnixMilli(),
	}, nil
}

type chunkSender struct {
	s dexv1.AdminService_SaveSnapshotServer
}

func (c chunkSender) Write(p []byte) (int, error) {
	if err := c.s.Send(&dexv1.SnapshotChunk{Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// RestoreSnapshot replaces the whole state of this node's partition with
// a backup's: a backup of the same partition of a cluster of as many
// partitions. The file is received whole and verified (checksum, every
// record decodes) before anything changes.
func (a *Admin) RestoreSnapshot(stream dexv1.AdminService_RestoreSnapshotServer) error {
	ctx := stream.Context()
	if err := a.leaderOnly(ctx); err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "dex-restore-*.dexbackup")
	if err != nil {
		return status.Errorf(codes.Internal, "spool the backup: %v", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	var first *dexv1.RestoreSnapshotRequest
	var size int64
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if first == nil {
			first = req
		}
		n, err := tmp.Write(req.Data)
		size += int64(n)
		if err != nil {
			return status.Errorf(codes.Internal, "spool the backup: %v", err)
		}
	}
	if first == nil {
		return status.Error(codes.InvalidArgument, "no backup was sent")
	}
	v, err := backup.Open(tmp, size)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "the backup is refused: %v", err)
	}
	if err := a.checkPartition(v.Header); err != nil {
		return err
	}
	loaded, err := backup.Load(v)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "the backup is refused: %v", err)
	}
	// Partition 0's state records the cluster it was taken on; another
	// partition's records none (backup.Open checked), and its header,
	// under the checksum, names it.
	backupCluster := loaded.State().Meta().GetClusterId()
	if v.Partition > 0 {
		backupCluster = v.ClusterID
	}
	if err := a.checkRestore(backupCluster, first); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, restoreWait)
	defer cancel()
	epoch, err := a.node.RestoreSnapshot(rctx, io.NewSectionReader(v.Payload, 0, v.Size), v.Index)
	if err != nil {
		return a.toStatus(ctx, err)
	}
	sessions := len(loaded.State().Sessions())
	a.log.Info("cluster restored from a backup", zap.Int("partition", v.Partition), zap.Uint64("backup_index", v.Index), zap.String("backup_cluster_id", backupCluster), zap.Int("sessions", sessions), zap.Uint64("epoch", epoch))
	return stream.SendAndClose(&dexv1.RestoreSnapshotResponse{
		BackupIndex:     v.Index,
		BackupTerm:      v.Term,
		BackupClusterId: backupCluster,
		Sessions:        uint64(sessions),
		Epoch:           epoch,
	})
}

// checkPartition refuses a backup of a cluster of another number of
// partitions, and one partition's backup sent to another partition.
func (a *Admin) checkPartition(h backup.Header) error {
	if got, n := h.PartitionCount(), a.partitionCount(); got != n {
		return status.Errorf(codes.FailedPrecondition, "the backup was taken on a cluster of %s and this cluster has %d: a restore needs the same number of partitions", nPartitions(got), n)
	}
	if k := a.node.Partition(); h.Partition != k {
		return status.Errorf(codes.InvalidArgument, "the backup is partition %d's and this is partition %d: each partition is restored from its own backup (dexctl snapshot restore sends each its own)", h.Partition, k)
	}
	return nil
}

// checkRestore refuses a backup of another cluster (backupCluster: the one
// partition 0's state records, the header of another partition's) and the
// replacement of sessions unless the request allows them.
func (a *Admin) checkRestore(backupCluster string, req *dexv1.RestoreSnapshotRequest) error {
	here := a.node.ClusterID()
	if here == "" {
		return status.Error(codes.Unavailable, "this cluster has no id yet (its first leader is setting it up); retry in a moment")
	}
	if backupCluster != here && !req.AllowOtherCluster {
		shown := backupCluster
		if shown == "" {
			shown = "(none)"
		}
		return status.Errorf(codes.FailedPrecondition, "the backup was taken on cluster %s and this is cluster %s: to restore it here anyway (disaster recovery into a new cluster) allow another cluster's backup; this cluster keeps its id %s", shown, here, here)
	}
	if n := len(a.node.State().Sessions()); n > 0 && !req.ReplaceSessions {
		where := "this cluster"
		if a.partitionCount() > 1 {
			where = fmt.Sprintf("partition %d of this cluster", a.node.Partition())
		}
		return status.Errorf(codes.FailedPrecondition, "%s holds %d sessions and a restore replaces the whole state: confirm to replace them", where, n)
	}
	return nil
}

// nPartitions is "1 partition", "3 partitions".
func nPartitions(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}
