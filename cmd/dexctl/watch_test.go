package main

import (
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// keptSessions keeps the events 5 and 6: 1..4 were dropped by the retention.
type keptSessions struct {
	dexv1.UnimplementedSessionServiceServer
}

func (keptSessions) WatchSession(req *dexv1.WatchSessionRequest, stream dexv1.SessionService_WatchSessionServer) error {
	if req.AfterSeq < 4 {
		st, _ := status.New(codes.OutOfRange, "events no longer kept").WithDetails(&dexv1.EventsNotKept{
			SessionId: req.SessionId, AfterSeq: req.AfterSeq, ResumeAfterSeq: 4, FirstKeptSeq: 5,
		})
		return st.Err()
	}
	for seq := max(req.AfterSeq+1, 5); seq <= 6; seq++ {
		if err := stream.Send(&dexv1.Event{Seq: seq, SessionId: req.SessionId, Type: "message_received"}); err != nil {
			return err
		}
	}
	return nil // the stream ends: the watch returns
}

func startKeptNode(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(client.HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	dexv1.RegisterSessionServiceServer(srv, keptSessions{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestSessionWatchSaysWhichEventsWereNoLongerKept(t *testing.T) {
	addr := startKeptNode(t)
	out, err := run(t, "--addr", addr, "session", "watch", "s1", "--after", "1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("output:\n%s\nwant the gap line and 2 events", out)
	}
	if want := "events after 1 up to 4 are no longer kept (event retention); resuming from the first kept event 5"; lines[0] != want {
		t.Fatalf("first line %q; want %q", lines[0], want)
	}
	if !strings.HasPrefix(strings.TrimSpace(lines[1]), "5 ") || !strings.HasPrefix(strings.TrimSpace(lines[2]), "6 ") {
		t.Fatalf("events:\n%s", out)
	}

	out, err = run(t, "--addr", addr, "session", "watch", "s1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, `{"events_not_kept":{"after_seq":0,"first_kept_seq":5,"session_id":"s1","through_seq":4}}`) {
		t.Fatalf("JSON output:\n%s", out)
	}
}
