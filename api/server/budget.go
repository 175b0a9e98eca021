package server

import (
	"context"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// AgentBudgets are the budgets a session of each agent starts with, by
// agent name ("" for the default agent), over which a CreateSession's own
// fields go (dexd --agent-budget).
type AgentBudgets map[string]*dexv1.Budget

// sessionBudget is the budget a new session of req starts with: its agent's
// default with the request's fields over it (nil: no limits).
func (s *Sessions) sessionBudget(req *dexv1.CreateSessionRequest) *fsmpb.Budget {
	b := fsmpb.BudgetFromAPI(wirerules.OverBudget(s.budgets[s.agentOf(req)], req.Budget))
	if b.SizeVT() == 0 {
		return nil
	}
	return b
}

// AgentProviders are the providers whose limits each agent's model calls
// count against, by agent name ("" for the default agent; dexd
// --agent-provider).
type AgentProviders map[string]string

// agentOf is the agent a new session of req runs.
func (s *Sessions) agentOf(req *dexv1.CreateSessionRequest) string {
	if req.Agent == "" && req.ParentId != "" {
		if p := s.node.State().Session(req.ParentId); p != nil {
			return p.Agent // a child runs its parent's agent (fsm.sessionAgent)
		}
	}
	return req.Agent
}

// SetBudget changes the given fields of a session's budget.
func (s *Sessions) SetBudget(ctx context.Context, req *dexv1.SetBudgetRequest) (*dexv1.SetBudgetResponse, error) {
	if err := required("session_id", req.SessionId); err != nil {
		return nil, err
	}
	ch := req.Change
	c := &fsmpb.SetBudget{SessionId: req.SessionId}
	if ch != nil {
		c.Change = &fsmpb.BudgetChange{
			MaxTokens: ch.MaxTokens, MaxCostMicros: ch.MaxCostMicros, MaxTurns: ch.MaxTurns,
			MaxModelCallsPerTurn: ch.MaxModelCallsPerTurn, MaxToolCallsPerTurn: ch.MaxToolCallsPerTurn, LoopLimit: ch.LoopLimit,
		}
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetBudget{SetBudget: c}}); err != nil {
		return nil, err
	}
	return &dexv1.SetBudgetResponse{Session: s.node.State().Session(req.SessionId).API()}, nil
}
