package main

import (
	"context"
	"fmt"
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
	closes   []*dexv1.CloseSessionRequest
	budgets  []*dexv1.SetBudgetRequest
	labels   []*dexv1.SetLabelsRequest
	resumes  []*dexv1.ResumeSessionRequest
	forks    []*dexv1.ForkSessionRequest
	lists    []*dexv1.ListSessionsRequest
	events   map[string][]*dexv1.Event
	lastSeq  uint64 // GetSession's last_event_seq
	created  []*dexv1.CreateSessionRequest
	sent     []*dexv1.SendMessageRequest
	// Bulk jobs: the starts asked, the reads of each job so far and the
	// cancels (bulk_test.go).
	bulkStarts  []*dexv1.StartBulkActionRequest
	bulkGets    int
	bulkCancels []string
	// notLeader, when set, is the Unavailable answer to every write, as a
	// node that is not the leader gives it.
	notLeader string
}

func (f *fakeSessions) CreateSession(_ context.Context, req *dexv1.CreateSessionRequest) (*dexv1.CreateSessionResponse, error) {
	if f.notLeader != "" {
		return nil, status.Error(codes.Unavailable, f.notLeader)
	}
	f.created = append(f.created, req)
	return &dexv1.CreateSessionResponse{Session: &dexv1.Session{Id: req.SessionId}}, nil
}

func (f *fakeSessions) SendMessage(_ context.Context, req *dexv1.SendMessageRequest) (*dexv1.SendMessageResponse, error) {
	if f.notLeader != "" {
		return nil, status.Error(codes.Unavailable, f.notLeader)
	}
	f.sent = append(f.sent, req)
	return &dexv1.SendMessageResponse{}, nil
}

// fakeAdmin answers Status with a fixed view of the cluster and records
// removals.
type fakeAdmin struct {
	dexv1.UnimplementedAdminServiceServer
	status  *dexv1.StatusResponse
	removed []string
	// notLeader, when set, is the Unavailable answer to leader-only calls.
	notLeader string
}

func (f *fakeAdmin) TransferLeadership(context.Context, *dexv1.TransferLeadershipRequest) (*dexv1.TransferLeadershipResponse, error) {
	if f.notLeader != "" {
		return nil, status.Error(codes.Unavailable, f.notLeader)
	}
	return &dexv1.TransferLeadershipResponse{}, nil
}

func (f *fakeAdmin) Status(context.Context, *dexv1.StatusRequest) (*dexv1.StatusResponse, error) {
	return f.status, nil
}

func (f *fakeAdmin) RemoveNode(_ context.Context, req *dexv1.RemoveNodeRequest) (*dexv1.RemoveNodeResponse, error) {
	f.removed = append(f.removed, req.NodeId)
	return &dexv1.RemoveNodeResponse{}, nil
}

// threeNodes is a Status of three voters in the given states.
func threeNodes(leader string, states ...string) *dexv1.StatusResponse {
	st := &dexv1.StatusResponse{Leader: leader, AnsweredBy: "n1"}
	for i, s := range states {
		st.Nodes = append(st.Nodes, &dexv1.NodeStatus{Id: fmt.Sprintf("n%d", i+1), Suffrage: "voter", State: s})
	}
	return st
}

func (f *fakeSessions) ListSessions(_ context.Context, req *dexv1.ListSessionsRequest) (*dexv1.ListSessionsResponse, error) {
	f.lists = append(f.lists, req)
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

// CloseSession closes "idle" at once (kept an hour) and leaves "busy"
// closing; any other session is not found.
func (f *fakeSessions) CloseSession(_ context.Context, req *dexv1.CloseSessionRequest) (*dexv1.CloseSessionResponse, error) {
	f.closes = append(f.closes, req)
	switch req.SessionId {
	case "idle":
		return &dexv1.CloseSessionResponse{Session: &dexv1.Session{Id: "idle", Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED, DeleteAtMs: 1767229200000}}, nil
	case "forever":
		return &dexv1.CloseSessionResponse{Session: &dexv1.Session{Id: "forever", Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED}}, nil
	case "busy":
		return &dexv1.CloseSessionResponse{Session: &dexv1.Session{Id: "busy", Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING, CloseRequestedAtMs: 1}}, nil
	}
	return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
}

func (f *fakeSessions) SetLabels(_ context.Context, req *dexv1.SetLabelsRequest) (*dexv1.SetLabelsResponse, error) {
	if req.SessionId != "s1" {
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
	}
	f.labels = append(f.labels, req)
	return &dexv1.SetLabelsResponse{Session: &dexv1.Session{Id: "s1", Labels: req.Set}}, nil
}

// ForkSession forks s1 at any seq up to 8, refusing the rest as the
// cluster would.
func (f *fakeSessions) ForkSession(_ context.Context, req *dexv1.ForkSessionRequest) (*dexv1.ForkSessionResponse, error) {
	switch {
	case req.SourceSessionId != "s1":
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SourceSessionId)
	case req.AtSeq > 8:
		return nil, status.Errorf(codes.FailedPrecondition, "entry %d of session s1 is inside turn 3, which has not ended (the session is running): fork at an entry before 9, or once the turn ends", req.AtSeq)
	}
	f.forks = append(f.forks, req)
	st := dexv1.SessionStatus_SESSION_STATUS_IDLE
	if req.Message != "" {
		st = dexv1.SessionStatus_SESSION_STATUS_RUNNING
	}
	return &dexv1.ForkSessionResponse{Session: &dexv1.Session{Id: req.SessionId, Status: st, ForkedFrom: "s1", ForkedAtSeq: req.AtSeq}}, nil
}

func (f *fakeSessions) SetBudget(_ context.Context, req *dexv1.SetBudgetRequest) (*dexv1.SetBudgetResponse, error) {
	f.budgets = append(f.budgets, req)
	if req.SessionId != "s1" {
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
	}
	b := &dexv1.Budget{MaxTurns: 4}
	if ch := req.Change; ch != nil && ch.MaxTokens != nil {
		b.MaxTokens = *ch.MaxTokens
	}
	return &dexv1.SetBudgetResponse{Session: &dexv1.Session{Id: "s1", Budget: b}}, nil
}

func (f *fakeSessions) GetSession(_ context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	for _, s := range f.all {
		if s.Id == req.SessionId {
			return &dexv1.GetSessionResponse{Session: &dexv1.Session{Id: s.Id, Status: s.Status, Labels: s.Labels,
				ForkedFrom: s.ForkedFrom, ForkedAtSeq: s.ForkedAtSeq}, LastEventSeq: f.lastSeq}, nil
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
	return startFakeNode(t, f, nil, true)
}

// startFakeNode serves f and, unless nil, a; serving is what its health
// service reports.
func startFakeNode(t *testing.T, f *fakeSessions, a *fakeAdmin, serving bool) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(client.HealthService, healthpb.HealthCheckResponse_SERVING)
	if !serving {
		hs.SetServingStatus(client.HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	healthpb.RegisterHealthServer(srv, hs)
	dexv1.RegisterSessionServiceServer(srv, f)
	if a != nil {
		dexv1.RegisterAdminServiceServer(srv, a)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
