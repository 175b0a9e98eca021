package console

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// fakeAPI is a SessionService and AdminService over an in-memory state,
// with the API's rules for the waits the console acts on.
type fakeAPI struct {
	dexv1.UnimplementedSessionServiceServer
	dexv1.UnimplementedAdminServiceServer
	dexv1.UnimplementedScheduleServiceServer
	schedules []*dexv1.Schedule
	jobs      []*dexv1.BulkJob

	mu       sync.Mutex
	sessions map[string]*dexv1.GetSessionResponse
	events   map[string][]*dexv1.Event
	// tokens, when set: secret -> may act (client) or only read.
	tokens map[string]bool
	calls  []string // the writes that changed something
	// down, when set, is the Unavailable answer to ListSessions, as when no
	// node serves clients; status, when set, is the answer to Status, and
	// statusRefused, when set, Status's refusal (as of a token that may not
	// ask). statusCalls counts the Status calls.
	down          string
	status        *dexv1.StatusResponse
	statusRefused codes.Code
	statusCalls   int
	// probes counts the CancelSessions without a session id (the
	// console's write probe); probeDown, when set, is their Unavailable
	// answer, as when no node serves clients.
	probes    int
	probeDown string
	// lists are the ListSessions requests, gets the sessions GetSession
	// was asked for; scan, when set, is how many sessions one page of
	// ListSessions examines (fake_list_test.go).
	lists []*dexv1.ListSessionsRequest
	gets  []string
	scan  int
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{sessions: map[string]*dexv1.GetSessionResponse{}, events: map[string][]*dexv1.Event{}}
}

func (f *fakeAPI) add(s *dexv1.Session, steps ...*dexv1.Step) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range steps {
		st.SessionId = s.Id
	}
	f.sessions[s.Id] = &dexv1.GetSessionResponse{Session: s, Steps: steps, LastEventSeq: uint64(len(f.events[s.Id]))}
}

// statusCount is how many Status calls the fake answered or refused.
func (f *fakeAPI) statusCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statusCalls
}

func (f *fakeAPI) writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.calls...)
}

// authorize plays the API's roles: no token or an unknown one is
// Unauthenticated, a read-only token may not write.
func (f *fakeAPI) authorize(ctx context.Context, write bool) error {
	if f.tokens == nil {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get("authorization")
	if len(v) == 0 {
		return status.Error(codes.Unauthenticated, "this cluster requires a token")
	}
	canWrite, ok := f.tokens[strings.TrimPrefix(v[0], "Bearer ")]
	if !ok {
		return status.Error(codes.Unauthenticated, "unknown token")
	}
	if write && !canWrite {
		return status.Error(codes.PermissionDenied, "a reader token may not call this")
	}
	return nil
}

func (f *fakeAPI) GetSession(ctx context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	if err := f.authorize(ctx, false); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, req.SessionId)
	got := f.sessions[req.SessionId]
	if got == nil {
		return nil, status.Errorf(codes.NotFound, "session %s not found", req.SessionId)
	}
	return proto.Clone(got).(*dexv1.GetSessionResponse), nil
}

// waitingStep finds a step by id that waits as kind.
func (f *fakeAPI) waitingStep(id string, kind dexv1.StepKind) (*dexv1.GetSessionResponse, *dexv1.Step, error) {
	for _, got := range f.sessions {
		for _, st := range got.Steps {
			if st.Id != id {
				continue
			}
			if st.Kind != kind || st.Status != dexv1.StepStatus_STEP_STATUS_WAITING {
				return nil, nil, status.Errorf(codes.FailedPrecondition, "step %s is not waiting for this", id)
			}
			return got, st, nil
		}
	}
	return nil, nil, status.Errorf(codes.NotFound, "step %s not found", id)
}

func (f *fakeAPI) ResolveApproval(ctx context.Context, req *dexv1.ResolveApprovalRequest) (*dexv1.ResolveApprovalResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got, st, err := f.waitingStep(req.StepId, dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL)
	if err != nil {
		return nil, err
	}
	st.Status, st.Outcome = dexv1.StepStatus_STEP_STATUS_DONE, dexv1.Outcome_OUTCOME_SUCCEEDED
	got.Session.Status = dexv1.SessionStatus_SESSION_STATUS_RUNNING
	verb := "approve"
	if !req.Approved {
		verb = "deny"
	}
	f.calls = append(f.calls, verb+" "+req.StepId+" "+req.Reason)
	return &dexv1.ResolveApprovalResponse{}, nil
}

func (f *fakeAPI) AnswerQuestion(ctx context.Context, req *dexv1.AnswerQuestionRequest) (*dexv1.AnswerQuestionResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Answer == "" {
		return nil, status.Error(codes.InvalidArgument, "an answer is not empty")
	}
	_, st, err := f.waitingStep(req.StepId, dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER)
	if err != nil {
		return nil, err
	}
	st.Status = dexv1.StepStatus_STEP_STATUS_DONE
	f.calls = append(f.calls, "answer "+req.StepId+" "+req.Answer)
	return &dexv1.AnswerQuestionResponse{}, nil
}

func (f *fakeAPI) ResumeSession(ctx context.Context, req *dexv1.ResumeSessionRequest) (*dexv1.ResumeSessionResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.sessions[req.SessionId]
	if got == nil {
		return nil, status.Errorf(codes.NotFound, "session %s not found", req.SessionId)
	}
	if st := got.Session.Status; st != dexv1.SessionStatus_SESSION_STATUS_PAUSED && st != dexv1.SessionStatus_SESSION_STATUS_ERRORED {
		return nil, status.Errorf(codes.FailedPrecondition, "session %s is not paused or errored", req.SessionId)
	}
	got.Session.Status = dexv1.SessionStatus_SESSION_STATUS_RUNNING
	f.calls = append(f.calls, "resume "+req.SessionId+" "+req.Choice.String())
	return &dexv1.ResumeSessionResponse{}, nil
}

func (f *fakeAPI) ReconcileOutcome(ctx context.Context, req *dexv1.ReconcileOutcomeRequest) (*dexv1.ReconcileOutcomeResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, got := range f.sessions {
		for _, st := range got.Steps {
			if st.Id == req.StepId {
				if st.Outcome != dexv1.Outcome_OUTCOME_UNKNOWN {
					return nil, status.Errorf(codes.FailedPrecondition, "step %s is not outcome_unknown", st.Id)
				}
				st.Outcome = req.Outcome
				f.calls = append(f.calls, "reconcile "+req.StepId+" "+req.Outcome.String()+" "+req.Note)
				return &dexv1.ReconcileOutcomeResponse{}, nil
			}
		}
	}
	return nil, status.Errorf(codes.NotFound, "step %s not found", req.StepId)
}

func (f *fakeAPI) WatchSession(req *dexv1.WatchSessionRequest, stream dexv1.SessionService_WatchSessionServer) error {
	if err := f.authorize(stream.Context(), false); err != nil {
		return err
	}
	f.mu.Lock()
	_, ok := f.sessions[req.SessionId]
	evs := append([]*dexv1.Event{}, f.events[req.SessionId]...)
	f.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "session %s not found", req.SessionId)
	}
	for _, ev := range evs {
		if ev.Seq > req.AfterSeq || (ev.Output != nil && req.LiveOutput) {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
	return nil // the stream ends: the test reads what was sent
}

func (f *fakeAPI) Status(ctx context.Context, _ *dexv1.StatusRequest) (*dexv1.StatusResponse, error) {
	f.mu.Lock()
	f.statusCalls++
	f.mu.Unlock()
	if f.statusRefused != codes.OK {
		return nil, status.Error(f.statusRefused, "an admin token may call this")
	}
	if f.status != nil {
		return f.status, nil
	}
	return &dexv1.StatusResponse{Leader: "n1", Term: 3, CommitIndex: 42, AppliedIndex: 42, Epoch: 7, AnsweredBy: "n2", Nodes: []*dexv1.NodeStatus{
		{Id: "n1", State: "leader", Term: 3, CommitIndex: 42, AppliedIndex: 42, Ready: true, Suffrage: "voter"},
		{Id: "n2", State: "follower", Term: 3, CommitIndex: 42, AppliedIndex: 41, ReadyReason: "not the leader", Suffrage: "voter"},
		{Id: "n3", State: "unreachable", Suffrage: "voter"},
	}}, nil
}

func (f *fakeAPI) ListWorkers(ctx context.Context, _ *dexv1.ListWorkersRequest) (*dexv1.ListWorkersResponse, error) {
	return &dexv1.ListWorkersResponse{AnsweredBy: "n1", Leader: true, Workers: []*dexv1.WorkerStatus{{
		Worker:        &dexv1.WorkerInfo{Id: "w-alpha", RunsModel: true, Tools: []*dexv1.ToolSpec{{Name: "deploy", Access: dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, NeedsApproval: true, MaxAttempts: 3}}},
		LastContactMs: 1_700_000_000_000, OpenPolls: 1,
	}, {
		Worker: &dexv1.WorkerInfo{Id: "w-bots", RunsModel: true, Agents: []string{"bot@1", "bot@2"},
			Tools: []*dexv1.ToolSpec{{Name: "search", Access: dexv1.ToolAccess_TOOL_ACCESS_READ, Agents: []string{"bot@1"}}}},
	}, {
		Worker: &dexv1.WorkerInfo{Id: "w-tools", Tools: []*dexv1.ToolSpec{{Name: "fetch", Access: dexv1.ToolAccess_TOOL_ACCESS_READ}}},
	}}, Tools: []*dexv1.ToolQueue{{Tool: "deploy", Queued: 4, Running: 1, Workers: []string{"w-alpha"}}}}, nil
}

// serveFake serves api on 127.0.0.1 and returns a console on it.
func serveFake(t testing.TB, api *fakeAPI, cfg Config) *Console {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	dexv1.RegisterSessionServiceServer(srv, api)
	dexv1.RegisterAdminServiceServer(srv, api)
	dexv1.RegisterScheduleServiceServer(srv, api)
	go srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop() })
	cfg.Sessions, cfg.Admin = conn, conn
	if cfg.Where == nil {
		cfg.Where = func() Where { return Where{Node: "n2", Role: "follower", LeaderID: "n1", LeaderAddr: "127.0.0.1:7101"} }
	}
	return New(cfg)
}

// browser keeps the console's cookies between requests, as a browser does.
type browser struct {
	t       testing.TB
	h       http.Handler
	cookies map[string]*http.Cookie
	header  http.Header
}

func newBrowser(t testing.TB, h http.Handler) *browser {
	return &browser{t: t, h: h, cookies: map[string]*http.Cookie{}, header: http.Header{}}
}

func (b *browser) do(req *http.Request) *httptest.ResponseRecorder {
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	for k, v := range b.header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return rec
}

func (b *browser) get(path string) *httptest.ResponseRecorder {
	return b.do(httptest.NewRequest(http.MethodGet, path, nil))
}

// post sends a form with the CSRF token of the cookie (unless form sets one).
func (b *browser) post(path string, form url.Values) *httptest.ResponseRecorder {
	if _, ok := form["csrf"]; !ok {
		if c := b.cookies[csrfCookie]; c != nil {
			form.Set("csrf", c.Value)
		}
	}
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func wantStatus(t testing.TB, rec *httptest.ResponseRecorder, code int, contains ...string) string {
	t.Helper()
	body := rec.Body.String()
	if rec.Code != code {
		t.Fatalf("status %d; want %d; body:\n%s", rec.Code, code, body)
	}
	for _, s := range contains {
		if !strings.Contains(body, s) {
			t.Fatalf("the page lacks %q; body:\n%s", s, body)
		}
	}
	return body
}

func (f *fakeAPI) ListSchedules(context.Context, *dexv1.ListSchedulesRequest) (*dexv1.ListSchedulesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &dexv1.ListSchedulesResponse{}
	for _, s := range f.schedules {
		out.Schedules = append(out.Schedules, proto.Clone(s).(*dexv1.Schedule))
	}
	return out, nil
}
