package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Sessions implements dexv1.SessionServiceServer.
type Sessions struct {
	dexv1.UnimplementedSessionServiceServer
	readyGate
	limits    Limits
	retention Retention
	budgets   AgentBudgets
	providers AgentProviders
	outputs   OutputHubs // nil: no live output
	// importLimit bounds an imported object (0: MaxImportObject).
	importLimit int
	// partition of partitions is the partition these handlers serve (a
	// cluster of one: 0 of 0).
	partition, partitions int
}

// NewSessions returns the client handlers of node.
func NewSessions(node *cluster.Node, limits Limits) *Sessions {
	return &Sessions{readyGate: readyGate{node: node}, limits: limits}
}

func (s *Sessions) CreateSession(ctx context.Context, req *dexv1.CreateSessionRequest) (*dexv1.CreateSessionResponse, error) {
	if err := s.limits.checkMessage(req.Message); err != nil {
		return nil, err
	}
	threshold, err := s.limits.compactionThreshold(req.CompactionThreshold)
	if err != nil {
		return nil, err
	}
	if r := fsm.CheckDispatchOrder(req.Priority, req.FairnessKey, req.FairnessWeight); r != nil {
		return nil, status.Error(codes.InvalidArgument, r.Reason)
	}
	labels := labelsFromAPI(req.Labels)
	if r := fsm.CheckLabels(labels); r != nil {
		return nil, status.Error(codes.InvalidArgument, r.Reason)
	}
	id, err := s.placeSession(req)
	if err != nil {
		return nil, err
	}
	c := &fsmpb.CreateSession{
		SessionId: id, ParentId: req.ParentId, Message: req.Message, Agent: req.Agent,
		CompactionThreshold: threshold, MaxModelInput: s.limits.MaxModelInput, RetentionMs: req.RetentionMs,
		Budget:   s.sessionBudget(req),
		Priority: req.Priority, FairnessKey: req.FairnessKey, FairnessWeight: req.FairnessWeight,
		Provider: s.providers[s.agentOf(req)],
		Labels:   labels,
	}
	if req.Message != "" {
		c.Trace = callTrace(ctx)
		c.MessageId = req.IdempotencyKey
		if c.MessageId == "" {
			c.MessageId = id + "/first"
		}
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: c}}); err != nil {
		return nil, err
	}
	return &dexv1.CreateSessionResponse{Session: s.node.State().Session(id).API()}, nil
}

// placeSession is the new session's id: the one asked for, or a new one
// that lives in this partition. In a partitioned cluster a child lives in
// its parent's partition, so a child id of another partition is refused.
func (s *Sessions) placeSession(req *dexv1.CreateSessionRequest) (string, error) {
	if s.partitions <= 1 {
		if req.SessionId == "" {
			return wirerules.NewSessionID(), nil
		}
		return req.SessionId, nil
	}
	if req.SessionId == "" {
		return wirerules.NewSessionIDIn(s.partition, s.partitions), nil
	}
	if got := wirerules.PartitionOf(req.SessionId, s.partitions); got != s.partition {
		what := "its parent's partition"
		if req.ParentId == "" {
			what = "the partition that received it"
		}
		return "", status.Errorf(codes.InvalidArgument, "session id %q lives in partition %d of %d, not %s (%d): a child session lives in its parent's partition; leave session_id empty and the cluster draws an id that does",
			req.SessionId, got, s.partitions, what, s.partition)
	}
	return req.SessionId, nil
}

func (s *Sessions) SendMessage(ctx context.Context, req *dexv1.SendMessageRequest) (*dexv1.SendMessageResponse, error) {
	if err := required("idempotency_key", req.IdempotencyKey); err != nil {
		return nil, err
	}
	if err := s.limits.checkMessage(req.Text); err != nil {
		return nil, err
	}
	res, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{
		SessionId: req.SessionId, MessageId: req.IdempotencyKey, Text: req.Text, Trace: callTrace(ctx),
	}}})
	if err != nil {
		return nil, err
	}
	return &dexv1.SendMessageResponse{Duplicate: res.Replayed}, nil
}

// Page bounds of GetSession and ListSessions: a page stops at its count or
// its bytes, whichever comes first, so any session can be read.
const (
	defaultHistoryPage = 500
	defaultStepsPage   = 500
	defaultSessionPage = 1000
	maxPage            = 10000
	pageBytes          = 1 << 20
)

func pageSize(asked uint32, def int) int {
	if asked == 0 {
		return def
	}
	return min(int(asked), maxPage)
}

func (s *Sessions) GetSession(ctx context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := required("session_id", req.SessionId); err != nil {
		return nil, err
	}
	st := s.node.State()
	sess := st.Session(req.SessionId)
	if sess == nil {
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
	}
	view := sess.API()
	resp := &dexv1.GetSessionResponse{Session: view}
	history, next := st.History(req.SessionId, req.HistoryAfterSeq, pageSize(req.HistoryLimit, defaultHistoryPage), pageBytes)
	view.History, resp.NextHistoryAfterSeq = fsmpb.HistoryAPI(history), next
	view.Inbox = fsmpb.InboxAPI(st.Inbox(req.SessionId, pageBytes))
	resp.LastEventSeq = st.EventLog(req.SessionId).GetLastSeq()
	steps, nextSteps := st.StepsPage(req.SessionId, req.StepsAfter, pageSize(req.StepsLimit, defaultStepsPage), pageBytes)
	resp.Steps, resp.NextStepsAfter = apiSteps(st, steps), nextSteps
	folded, nextFolded := st.FoldedTurns(req.SessionId, req.FoldedAfterTurn, pageSize(req.StepsLimit, defaultStepsPage))
	resp.FoldedTurns, resp.NextFoldedAfterTurn = fsmpb.FoldedTurnsAPI(folded), nextFolded
	return resp, nil
}

func (s *Sessions) ResolveApproval(ctx context.Context, req *dexv1.ResolveApprovalRequest) (*dexv1.ResolveApprovalResponse, error) {
	if err := s.limits.checkText("reason", req.Reason); err != nil {
		return nil, err
	}
	_, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_ResolveApproval{ResolveApproval: &fsmpb.ResolveApproval{
		StepId: req.StepId, Approved: req.Approved, Reason: req.Reason,
	}}})
	if err != nil {
		return nil, err
	}
	failpoint(FailpointAfterWaitResolved)
	return &dexv1.ResolveApprovalResponse{}, nil
}

func (s *Sessions) AnswerQuestion(ctx context.Context, req *dexv1.AnswerQuestionRequest) (*dexv1.AnswerQuestionResponse, error) {
	if err := s.limits.checkText("answer", req.Answer); err != nil {
		return nil, err
	}
	_, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_AnswerQuestion{AnswerQuestion: &fsmpb.AnswerQuestion{
		StepId: req.StepId, Answer: req.Answer,
	}}})
	if err != nil {
		return nil, err
	}
	failpoint(FailpointAfterWaitResolved)
	return &dexv1.AnswerQuestionResponse{}, nil
}

func (s *Sessions) ResumeSession(ctx context.Context, req *dexv1.ResumeSessionRequest) (*dexv1.ResumeSessionResponse, error) {
	_, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_ResumeSession{ResumeSession: &fsmpb.ResumeSession{SessionId: req.SessionId, Choice: fsmpb.ResumeChoice(req.Choice)}}})
	if err != nil {
		return nil, err
	}
	return &dexv1.ResumeSessionResponse{}, nil
}

func (s *Sessions) ReconcileOutcome(ctx context.Context, req *dexv1.ReconcileOutcomeRequest) (*dexv1.ReconcileOutcomeResponse, error) {
	if err := s.limits.checkText("note", req.Note); err != nil {
		return nil, err
	}
	_, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_ReconcileOutcome{ReconcileOutcome: &fsmpb.ReconcileOutcome{
		StepId: req.StepId, Outcome: fsmpb.Outcome(req.Outcome), Note: req.Note,
	}}})
	if err != nil {
		return nil, err
	}
	return &dexv1.ReconcileOutcomeResponse{}, nil
}
