package client

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// closingSessions fails the first close with Unavailable, as a leader that
// lost its answer, then closes; it knows only session "s".
type closingSessions struct {
	dexv1.UnimplementedSessionServiceServer
	calls int
}

func (f *closingSessions) CloseSession(_ context.Context, req *dexv1.CloseSessionRequest) (*dexv1.CloseSessionResponse, error) {
	f.calls++
	if req.SessionId != "s" {
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
	}
	if f.calls == 1 {
		return nil, status.Error(codes.Unavailable, "leadership lost")
	}
	return &dexv1.CloseSessionResponse{Session: &dexv1.Session{Id: "s", Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED}}, nil
}

func TestCloseSession_RetriedAndNotFoundReported(t *testing.T) {
	f := &closingSessions{}
	n := startNode(t, "A", nil, f)
	n.setServing(true)
	c := dialClient(t, []*node{n})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.CloseSession(ctx, "s")
	if err != nil || s.Status != dexv1.SessionStatus_SESSION_STATUS_CLOSED || f.calls != 2 {
		t.Fatalf("close: %v, %v after %d calls; want closed after a retry", s, err, f.calls)
	}
	if _, err := c.CloseSession(ctx, "nobody"); status.Code(err) != codes.NotFound {
		t.Fatalf("close of an unknown session: %v; want NotFound", err)
	}
}
