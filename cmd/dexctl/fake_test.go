package main

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// fakeSessions serves a fixed list of sessions in pages of pageSize (by
// id, as the cluster pages) and records cancels.
type fakeSessions struct {
	dexv1.UnimplementedSessionServiceServer
	all      []*dexv1.SessionSummary
	pageSize int
	cancels  []*dexv1.CancelSessionRequest
	events   map[string][]*dexv1.Event
	lastSeq  uint64 // GetSession's last_event_seq
}

func (f *fakeSessions) ListSessions(_ context.Context, req *dexv1.ListSessionsRequest) (*dexv1.ListSessionsResponse, error) {
	start := 0
	if req.PageToken != "" {
		for i, s := range f.all {
			if s.Id == req.PageToken {
				start = i
			}
		}
	}
	n := f.pageSize
	if req.PageSize > 0 && int(req.PageSize) < n {
		n = int(req.PageSize)
	}
	end := min(start+n, len(f.all))
	out := &dexv1.ListSessionsResponse{Sessions: f.all[start:end]}
	if end < len(f.all) {
		out.NextPageToken = f.all[end].Id
	}
	return out, nil
}

func (f *fakeSessions) CancelSession(_ context.Context, req *dexv1.CancelSessionRequest) (*dexv1.CancelSessionResponse, error) {
	if req.SessionId != "s1" {
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
	}
	f.cancels = append(f.cancels, req)
	return &dexv1.CancelSessionResponse{StepsCancelled: 2, AttemptsCancelled: 1}, nil
}

func (f *fakeSessions) GetSession(_ context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	for _, s := range f.all {
		if s.Id == req.SessionId {
			return &dexv1.GetSessionResponse{Session: &dexv1.Session{Id: s.Id, Status: s.Status}, LastEventSeq: f.lastSeq}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
}

func (f *fakeSessions) WatchSession(req *dexv1.WatchSessionRequest, stream dexv1.SessionService_WatchSessionServer) error {
	for _, e := range f.events[req.SessionId] {
		if e.Seq > req.AfterSeq {
			if err := stream.Send(e); err != nil {
				return err
			}
		}
	}
	<-stream.Context().Done() // a watch never ends by itself
	return nil
}

// startFake serves f as the node that serves clients.
func startFake(t *testing.T, f *fakeSessions) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(client.HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	dexv1.RegisterSessionServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
