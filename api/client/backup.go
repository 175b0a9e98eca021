package client

import (
	"context"
	"errors"
	"io"
	"strconv"

	"google.golang.org/grpc/metadata"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// BackupChunk is the size of the pieces SendBackup sends a backup in, well
// under gRPC's message limit.
const BackupChunk = 256 << 10

// ToPartition is ctx for a SaveSnapshot or RestoreSnapshot of partition k
// of a cluster of several partitions: it names k in the call's
// PartitionMetadataKey metadata, and any node takes the call to that
// partition's leader. A call that names none is partition 0's, so a
// cluster of one partition gets ctx as it is.
func ToPartition(ctx context.Context, k int) context.Context {
	if k == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, PartitionMetadataKey, strconv.Itoa(k))
}

// ReceiveBackup writes the backup a SaveSnapshot stream carries to w. It
// returns the stream's error as it came (a gRPC status), or w's.
func ReceiveBackup(stream dexv1.AdminService_SaveSnapshotClient, w io.Writer) error {
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := w.Write(chunk.Data); err != nil {
			return err
		}
	}
}

// SendBackup streams a backup file from r on a RestoreSnapshot stream and
// returns the cluster's answer. first carries the request's options
// (replace_sessions, allow_other_cluster); its data is filled in.
func SendBackup(stream dexv1.AdminService_RestoreSnapshotClient, r io.Reader, first *dexv1.RestoreSnapshotRequest) (*dexv1.RestoreSnapshotResponse, error) {
	buf := make([]byte, BackupChunk)
	req := first
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			req.Data = buf[:n]
			if err := stream.Send(req); err != nil {
				if errors.Is(err, io.EOF) {
					break // the server answered early: CloseAndRecv has its status
				}
				return nil, err
			}
			req = &dexv1.RestoreSnapshotRequest{}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return nil, rerr
		}
	}
	return stream.CloseAndRecv()
}
