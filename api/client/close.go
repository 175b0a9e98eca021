package client

import (
	"context"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// CloseSession closes a session: it takes no more messages and can still be
// read. A session in a turn is closing until the turn ends (the returned
// session is still running or waiting, with close_requested_at_ms set).
// Closing a closed session succeeds, so the call is retried as any
// idempotent one; NotFound for an unknown or deleted session.
func (c *Client) CloseSession(ctx context.Context, sessionID string) (*dexv1.Session, error) {
	req := &dexv1.CloseSessionRequest{SessionId: sessionID}
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.CloseSessionResponse, error) {
		return c.svc.CloseSession(ctx, req, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Session, nil
}
