package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// ForkSession creates a session whose history is a copy of the source's up
// to and including entry req.AtSeq (docs/forks.md); with req.Message the
// fork starts its first turn with it. With req.SessionId set the call is
// idempotent and retried: a repeat that finds the fork created by an
// earlier try of this call returns it. Without it the server picks the id
// (in the source's partition) and the call is repeated only when nothing
// was changed. A refused fork (NotFound, InvalidArgument,
// FailedPrecondition) changed nothing.
func (c *Client) ForkSession(ctx context.Context, req *dexv1.ForkSessionRequest) (*dexv1.Session, error) {
	idem := req.GetSessionId() != ""
	tries := 0
	resp, err := call(ctx, idem, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ForkSessionResponse, error) {
		tries++
		return c.svc.ForkSession(ctx, req, o...)
	})
	if err == nil {
		return resp.Session, nil
	}
	if idem && tries > 1 && status.Code(err) == codes.AlreadyExists {
		// An earlier try committed before its answer was lost.
		got, gerr := c.GetSession(ctx, req.SessionId)
		if gerr == nil && got.Session.GetForkedFrom() == req.SourceSessionId && got.Session.GetForkedAtSeq() == req.AtSeq {
			return got.Session, nil
		}
	}
	return nil, err
}
