package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// DeleteSession deletes an idle, paused or errored session (FailedPrecondition
// for a running or waiting one). NotFound on a retry counts as done: an
// earlier try may have committed before its answer was lost.
func (c *Client) DeleteSession(ctx context.Context, sessionID string) error {
	req := &dexv1.DeleteSessionRequest{SessionId: sessionID}
	tries := 0
	_, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.DeleteSessionResponse, error) {
		tries++
		return c.svc.DeleteSession(ctx, req, o...)
	})
	if tries > 1 && status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}
