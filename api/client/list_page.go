package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

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

// ListSessionsMatching lists the sessions req's filter matches, in its
// order, reading page after page until the last one (an empty
// next_page_token) or until limit sessions were read (0: every matching
// session). A filtered page may come back short, even empty, with a token:
// it reads on through those. It starts at req.PageToken (empty: the first
// page) and asks pages of req.PageSize (0: the server's default); req
// itself is not changed, and nil lists every session. Each page is a read,
// retried across a takeover like GetSession.
//
// Obviously bad input is refused before any call: a negative limit, an
// unknown status or order, a negative time bound, a label with an empty
// key or a key given twice. The cluster checks the rest (docs/labels.md).
func (c *Client) ListSessionsMatching(ctx context.Context, req *dexv1.ListSessionsRequest, limit int) ([]*dexv1.SessionSummary, error) {
	if limit < 0 {
		return nil, fmt.Errorf("limit %d: must be 0 (every matching session) or more", limit)
	}
	if err := checkListFilter(req); err != nil {
		return nil, err
	}
	page := &dexv1.ListSessionsRequest{}
	if req != nil {
		page = proto.Clone(req).(*dexv1.ListSessionsRequest)
	}
	var out []*dexv1.SessionSummary
	for {
		if want := limit - len(out); limit > 0 && int64(req.GetPageSize()) > int64(want) {
			page.PageSize = uint32(want) // no larger a page than is still wanted
		}
		resp, err := c.ListSessionsPage(ctx, page)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Sessions...)
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		if resp.NextPageToken == "" {
			return out, nil
		}
		page.PageToken = resp.NextPageToken
	}
}

// checkListFilter refuses what no cluster would take in a list's filter,
// naming the field.
func checkListFilter(req *dexv1.ListSessionsRequest) error {
	if req == nil {
		return nil
	}
	if _, ok := dexv1.SessionStatus_name[int32(req.Status)]; !ok {
		return fmt.Errorf("status %d: not a session status", req.Status)
	}
	if _, ok := dexv1.SessionOrder_name[int32(req.OrderBy)]; !ok {
		return fmt.Errorf("order_by %d: not a session order (known: SESSION_ORDER_UNSPECIFIED, SESSION_ORDER_CREATED, SESSION_ORDER_UPDATED)", req.OrderBy)
	}
	for _, b := range []struct {
		name string
		ms   int64
	}{
		{"created_after_ms", req.CreatedAfterMs}, {"created_before_ms", req.CreatedBeforeMs},
		{"updated_after_ms", req.UpdatedAfterMs}, {"updated_before_ms", req.UpdatedBeforeMs},
	} {
		if b.ms < 0 {
			return fmt.Errorf("%s %d: a time is Unix milliseconds, 0 or more (0: no bound)", b.name, b.ms)
		}
	}
	seen := make(map[string]bool, len(req.Labels))
	for i, l := range req.Labels {
		switch {
		case l == nil:
			return fmt.Errorf("labels[%d]: no label", i)
		case l.Key == "":
			return fmt.Errorf("labels[%d]: an empty label key", i)
		case seen[l.Key]:
			return fmt.Errorf("labels: key %q is given twice (a session has one value per key)", l.Key)
		}
		seen[l.Key] = true
	}
	return nil
}
