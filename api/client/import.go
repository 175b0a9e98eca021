package client

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

const (
	// importChunk is the size of the chunks ImportSession sends (the
	// server takes up to 1 MiB): well under any --max-payload a cluster
	// runs with.
	importChunk = 256 << 10
	// MaxImport is the largest archive object a cluster imports.
	MaxImport = 256 << 20
)

// ImportSession brings an archived session back into the cluster: r holds
// the archive object (`dexctl session export`, or the archive's file). The
// answer names the session and counts what it holds. The cluster verifies
// the whole object first: InvalidArgument for a damaged or foreign one,
// FailedPrecondition for a session that was in a turn when it was
// exported, AlreadyExists for an id the cluster holds. An import cut by a
// change of leader answers Aborted and is discarded by the new leader:
// send it again (AlreadyExists until its rows are gone). The call is
// repeated by itself only when a node refused it before reading it.
func (c *Client) ImportSession(ctx context.Context, r io.Reader) (*dexv1.ImportSessionResponse, error) {
	obj, err := io.ReadAll(io.LimitReader(r, MaxImport+1))
	if err != nil {
		return nil, fmt.Errorf("read the archived session: %w", err)
	}
	if len(obj) > MaxImport {
		return nil, fmt.Errorf("an archived session to import is at most %d bytes (256 MiB); this one is larger", MaxImport)
	}
	return call(ctx, false, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ImportSessionResponse, error) {
		stream, err := c.svc.ImportSession(ctx, o...)
		if err != nil {
			return nil, err
		}
		for rest := obj; len(rest) > 0; {
			n := min(len(rest), importChunk)
			if err := stream.Send(&dexv1.ImportSessionRequest{Chunk: rest[:n]}); err != nil {
				break // the server ended the stream: CloseAndRecv says why
			}
			rest = rest[n:]
		}
		return stream.CloseAndRecv()
	})
}
