package client

import (
	"context"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// ListSessionsBy lists every session, asking for pages of pageSize (0: the
// server's default page); a large page costs fewer round trips.
func (c *Client) ListSessionsBy(ctx context.Context, pageSize uint32) ([]*dexv1.SessionSummary, error) {
	var out []*dexv1.SessionSummary
	req := &dexv1.ListSessionsRequest{PageSize: pageSize}
	for {
		resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ListSessionsResponse, error) {
			return c.svc.ListSessions(ctx, req, o...)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Sessions...)
		if resp.NextPageToken == "" {
			return out, nil
		}
		req = &dexv1.ListSessionsRequest{PageSize: pageSize, PageToken: resp.NextPageToken}
	}
}

// ListSessionsPage returns one page of the sessions as the server answers
// req (its filter, order and token): a read, retried across a takeover
// like GetSession. A filtered page may be short, even empty, with a token
// to read on from.
func (c *Client) ListSessionsPage(ctx context.Context, req *dexv1.ListSessionsRequest) (*dexv1.ListSessionsResponse, error) {
	return call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ListSessionsResponse, error) {
		return c.svc.ListSessions(ctx, req, o...)
	})
}
