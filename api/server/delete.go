package server

import (
	"context"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// DeleteSession deletes an idle, paused or errored session through Raft.
// It is NotFound at once; the leader's session collector removes its rows.
func (s *Sessions) DeleteSession(ctx context.Context, req *dexv1.DeleteSessionRequest) (*dexv1.DeleteSessionResponse, error) {
	if err := required("session_id", req.SessionId); err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_DeleteSession{DeleteSession: &fsmpb.DeleteSession{SessionId: req.SessionId}}}); err != nil {
		return nil, err
	}
	return &dexv1.DeleteSessionResponse{}, nil
}
