package client

import (
	"errors"
	"io"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// BackupChunk is the size of the pieces SendBackup sends a backup in, well
// under gRPC's message limit.
const BackupChunk = 256 << 10

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
