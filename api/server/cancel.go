package server

import (
	"context"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// CancelSession stops a session's turn through Raft (fsm CancelTurn): the
// running attempts it cancels hear so on their Workers' next heartbeat.
func (s *Sessions) CancelSession(ctx context.Context, req *dexv1.CancelSessionRequest) (*dexv1.CancelSessionResponse, error) {
	if err := required("session_id", req.SessionId); err != nil {
		return nil, err
	}
	if err := s.limits.checkText("reason", req.Reason); err != nil {
		return nil, err
	}
	res, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{
		SessionId: req.SessionId, By: req.By, Reason: req.Reason,
	}}})
	if err != nil {
		return nil, err
	}
	return &dexv1.CancelSessionResponse{StepsCancelled: res.StepsCancelled, AttemptsCancelled: res.AttemptsCancelled}, nil
}
