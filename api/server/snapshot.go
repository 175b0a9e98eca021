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

// SaveSnapshot streams a backup file of the whole state, taken on the
// leader through raft.
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
	w := bufio.NewWriterSize(chunkSender{stream}, snapshotChunk)
	sum, err := backup.Write(w, h, br)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return status.Errorf(codes.Unavailable, "stream the snapshot: %v", err)
	}
	a.log.Info("backup saved", zap.Uint64("index", h.Index), zap.Uint64("term", h.Term), zap.Int64("bytes", h.Size), zap.String("sha256", sum))
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

// RestoreSnapshot replaces the whole state of the cluster with a backup's.
// The file is received whole and verified (checksum, every record decodes)
// before anything changes.
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
	loaded, err := backup.Load(v)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "the backup is refused: %v", err)
	}
	stateCluster := loaded.State().Meta().GetClusterId()
	if err := a.checkRestore(stateCluster, first); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, restoreWait)
	defer cancel()
	epoch, err := a.node.RestoreSnapshot(rctx, io.NewSectionReader(v.Payload, 0, v.Size), v.Index)
	if err != nil {
		return a.toStatus(ctx, err)
	}
	sessions := len(loaded.State().Sessions())
	a.log.Info("cluster restored from a backup", zap.Uint64("backup_index", v.Index), zap.String("backup_cluster_id", stateCluster), zap.Int("sessions", sessions), zap.Uint64("epoch", epoch))
	return stream.SendAndClose(&dexv1.RestoreSnapshotResponse{
		BackupIndex:     v.Index,
		BackupTerm:      v.Term,
		BackupClusterId: stateCluster,
		Sessions:        uint64(sessions),
		Epoch:           epoch,
	})
}

// checkRestore refuses a backup of another cluster (the one its state
// records, stateCluster) and the replacement of sessions unless the request
// allows them.
func (a *Admin) checkRestore(stateCluster string, req *dexv1.RestoreSnapshotRequest) error {
	here := a.node.ClusterID()
	if here == "" {
		return status.Error(codes.Unavailable, "this cluster has no id yet (its first leader is setting it up); retry in a moment")
	}
	if stateCluster != here && !req.AllowOtherCluster {
		shown := stateCluster
		if shown == "" {
			shown = "(none)"
		}
		return status.Errorf(codes.FailedPrecondition, "the backup was taken on cluster %s and this is cluster %s: to restore it here anyway (disaster recovery into a new cluster) allow another cluster's backup; this cluster keeps its id %s", shown, here, here)
	}
	if n := len(a.node.State().Sessions()); n > 0 && !req.ReplaceSessions {
		return status.Errorf(codes.FailedPrecondition, "this cluster holds %d sessions and a restore replaces the whole state: confirm to replace them", n)
	}
	return nil
}
