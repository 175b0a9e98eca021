package client

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// forkingSessions commits the first fork of "src" but loses its answer
// (Unavailable), so the retry finds the fork already there; it knows only
// session "src", forked at seq 4 at most.
type forkingSessions struct {
	dexv1.UnimplementedSessionServiceServer
	calls int
	fork  *dexv1.Session
}

func (f *forkingSessions) ForkSession(_ context.Context, req *dexv1.ForkSessionRequest) (*dexv1.ForkSessionResponse, error) {
	f.calls++
	switch {
	case req.SourceSessionId != "src":
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SourceSessionId)
	case req.AtSeq > 4:
		return nil, status.Errorf(codes.InvalidArgument, "session src has no history entry %d: its entries go up to 4", req.AtSeq)
	case f.fork != nil:
		return nil, status.Errorf(codes.AlreadyExists, "session %q already exists", req.SessionId)
	}
	f.fork = &dexv1.Session{Id: req.SessionId, ForkedFrom: "src", ForkedAtSeq: req.AtSeq}
	return nil, status.Error(codes.Unavailable, "leadership lost")
}

func (f *forkingSessions) GetSession(_ context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	if f.fork == nil || req.SessionId != f.fork.Id {
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
	}
	return &dexv1.GetSessionResponse{Session: f.fork}, nil
}

func TestForkSession_RetryFindsTheForkAndRefusalsPassThrough(t *testing.T) {
	f := &forkingSessions{}
	n := startNode(t, "A", nil, f)
	n.setServing(true)
	c := dialClient(t, []*node{n})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.ForkSession(ctx, &dexv1.ForkSessionRequest{SourceSessionId: "src", AtSeq: 3, SessionId: "f1"})
	if err != nil || s.Id != "f1" || s.ForkedFrom != "src" || s.ForkedAtSeq != 3 || f.calls != 2 {
		t.Fatalf("fork: %v, %v after %d calls; want f1 of src at 3 after 2", s, err, f.calls)
	}
	if _, err := c.ForkSession(ctx, &dexv1.ForkSessionRequest{SourceSessionId: "nobody", AtSeq: 1, SessionId: "f2"}); status.Code(err) != codes.NotFound {
		t.Fatalf("an unknown source: %v", err)
	}
	if _, err := c.ForkSession(ctx, &dexv1.ForkSessionRequest{SourceSessionId: "src", AtSeq: 9, SessionId: "f3"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a seq out of range: %v", err)
	}
}
