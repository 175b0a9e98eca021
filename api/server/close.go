package server

import (
	"context"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Retention is how long closed sessions are kept (dexd --retention and
// --agent-retention): a session created without a retention of its own is
// kept for its agent's, else the cluster's default. Zero keeps them for ever.
type Retention struct {
	Default time.Duration
	// Agents overrides the default per agent name ("" is the default agent).
	Agents map[string]time.Duration
}

// For is the retention of a session of agent.
func (r Retention) For(agent string) time.Duration {
	if d, ok := r.Agents[agent]; ok {
		return d
	}
	return r.Default
}

// CloseSession closes a session through Raft (fsm CloseSession), carrying
// this leader's retention for the session's agent: the state machine keeps
// the session's own retention when it has one.
func (s *Sessions) CloseSession(ctx context.Context, req *dexv1.CloseSessionRequest) (*dexv1.CloseSessionResponse, error) {
	if err := required("session_id", req.SessionId); err != nil {
		return nil, err
	}
	agent := ""
	if sess := s.node.State().Session(req.SessionId); sess != nil {
		agent = sess.Agent
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{
		SessionId: req.SessionId, RetentionMs: s.retention.For(agent).Milliseconds(),
	}}}); err != nil {
		return nil, err
	}
	return &dexv1.CloseSessionResponse{Session: s.node.State().Session(req.SessionId).API()}, nil
}
