package console

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The fake's calls that start and manage sessions, with the API's rules
// for what the console shows: each checks the token before the request,
// as the API's ACL does.

func (f *fakeAPI) session(id string) (*dexv1.GetSessionResponse, error) {
	got := f.sessions[id]
	if got == nil {
		return nil, status.Errorf(codes.NotFound, "session %s not found", id)
	}
	return got, nil
}

func checkFakeLabels(ls []*dexv1.Label) error {
	for _, l := range ls {
		if strings.ToLower(l.Key) != l.Key {
			return status.Errorf(codes.InvalidArgument, "label key %q: only a-z, 0-9 and \"._/-\" are allowed, beginning with a letter or digit", l.Key)
		}
	}
	return nil
}

func (f *fakeAPI) CreateSession(ctx context.Context, req *dexv1.CreateSessionRequest) (*dexv1.CreateSessionResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	if err := checkFakeLabels(req.Labels); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id := req.SessionId
	if id == "" {
		id = fmt.Sprintf("ses-new%d", len(f.sessions)+1)
	}
	if f.sessions[id] != nil {
		return nil, status.Errorf(codes.AlreadyExists, "session %q already exists", id)
	}
	s := &dexv1.Session{Id: id, Agent: req.Agent, Labels: req.Labels, Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 5000}
	if req.Message != "" {
		s.Status = dexv1.SessionStatus_SESSION_STATUS_RUNNING
		s.History = []*dexv1.HistoryEntry{{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: req.Message}}
		s.Turn = &dexv1.Turn{Number: 1, FirstHistorySeq: 1}
	}
	f.sessions[id] = &dexv1.GetSessionResponse{Session: s}
	f.calls = append(f.calls, fmt.Sprintf("create %s agent=%s labels=%s message=%s", id, req.Agent, labelsLine(req.Labels), req.Message))
	return &dexv1.CreateSessionResponse{Session: s}, nil
}

func labelsLine(ls []*dexv1.Label) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.Key+"="+l.Value)
	}
	return strings.Join(parts, ",")
}

func (f *fakeAPI) SendMessage(ctx context.Context, req *dexv1.SendMessageRequest) (*dexv1.SendMessageResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got, err := f.session(req.SessionId)
	if err != nil {
		return nil, err
	}
	if got.Session.Status == dexv1.SessionStatus_SESSION_STATUS_CLOSED {
		return nil, status.Errorf(codes.FailedPrecondition, "session %s is closed: it takes no more messages", req.SessionId)
	}
	for _, m := range got.Session.Inbox {
		if m.Id == req.IdempotencyKey {
			return &dexv1.SendMessageResponse{Duplicate: true}, nil
		}
	}
	got.Session.Inbox = append(got.Session.Inbox, &dexv1.Message{Id: req.IdempotencyKey, Text: req.Text})
	f.calls = append(f.calls, "send "+req.SessionId+" "+req.Text)
	return &dexv1.SendMessageResponse{}, nil
}

func (f *fakeAPI) CancelSession(ctx context.Context, req *dexv1.CancelSessionRequest) (*dexv1.CancelSessionResponse, error) {
	if req.SessionId == "" {
		f.mu.Lock()
		f.probes++
		down := f.probeDown
		f.mu.Unlock()
		if down != "" {
			return nil, status.Error(codes.Unavailable, down)
		}
	}
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	if req.SessionId == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id is required")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got, err := f.session(req.SessionId)
	if err != nil {
		return nil, err
	}
	if got.Session.Turn == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "session %s has no turn to cancel", req.SessionId)
	}
	got.Session.Turn = nil
	got.Session.Status = dexv1.SessionStatus_SESSION_STATUS_IDLE
	f.calls = append(f.calls, "cancel "+req.SessionId+" by "+req.By+": "+req.Reason)
	return &dexv1.CancelSessionResponse{StepsCancelled: 1}, nil
}

func (f *fakeAPI) CloseSession(ctx context.Context, req *dexv1.CloseSessionRequest) (*dexv1.CloseSessionResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got, err := f.session(req.SessionId)
	if err != nil {
		return nil, err
	}
	s := got.Session
	s.CloseRequestedAtMs = 6000
	if s.Turn == nil {
		s.Status, s.ClosedAtMs = dexv1.SessionStatus_SESSION_STATUS_CLOSED, 6000
	}
	f.calls = append(f.calls, "close "+req.SessionId)
	return &dexv1.CloseSessionResponse{Session: proto.Clone(s).(*dexv1.Session)}, nil
}

func (f *fakeAPI) DeleteSession(ctx context.Context, req *dexv1.DeleteSessionRequest) (*dexv1.DeleteSessionResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got, err := f.session(req.SessionId)
	if err != nil {
		return nil, err
	}
	if st := got.Session.Status; st == dexv1.SessionStatus_SESSION_STATUS_RUNNING || st == dexv1.SessionStatus_SESSION_STATUS_WAITING {
		return nil, status.Errorf(codes.FailedPrecondition, "session %s is %s: cancel its turn first", req.SessionId, strings.ToLower(strings.TrimPrefix(st.String(), "SESSION_STATUS_")))
	}
	delete(f.sessions, req.SessionId)
	f.calls = append(f.calls, "delete "+req.SessionId)
	return &dexv1.DeleteSessionResponse{}, nil
}

func (f *fakeAPI) ForkSession(ctx context.Context, req *dexv1.ForkSessionRequest) (*dexv1.ForkSessionResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	if err := checkFakeLabels(req.Labels); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got, err := f.session(req.SourceSessionId)
	if err != nil {
		return nil, err
	}
	src := got.Session
	var hist []*dexv1.HistoryEntry
	held := false
	for _, e := range src.History {
		if e.Seq <= req.AtSeq {
			hist = append(hist, e)
		}
		held = held || e.Seq == req.AtSeq
	}
	if !held {
		return nil, status.Errorf(codes.InvalidArgument, "session %s holds no history entry %d", src.Id, req.AtSeq)
	}
	if t := src.Turn; t != nil && t.FirstHistorySeq != 0 && req.AtSeq >= t.FirstHistorySeq {
		return nil, status.Errorf(codes.FailedPrecondition, "entry %d is in turn %d of session %s, which has not ended: fork before entry %d, or when the turn ends", req.AtSeq, t.Number, src.Id, t.FirstHistorySeq)
	}
	id := req.SessionId
	if id == "" {
		id = fmt.Sprintf("%s-fork%d", src.Id, len(f.sessions))
	}
	if f.sessions[id] != nil {
		return nil, status.Errorf(codes.AlreadyExists, "session %q already exists", id)
	}
	fork := &dexv1.Session{Id: id, Agent: src.Agent, Labels: src.Labels, History: hist, ForkedFrom: src.Id, ForkedAtSeq: req.AtSeq, Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 7000}
	if req.Agent != "" {
		fork.Agent = req.Agent
	}
	if len(req.Labels) > 0 {
		fork.Labels = req.Labels
	}
	f.sessions[id] = &dexv1.GetSessionResponse{Session: fork}
	f.calls = append(f.calls, fmt.Sprintf("fork %s at %d as %s agent=%s labels=%s message=%s", src.Id, req.AtSeq, id, req.Agent, labelsLine(req.Labels), req.Message))
	return &dexv1.ForkSessionResponse{Session: fork}, nil
}
