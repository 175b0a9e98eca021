package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// EditHistory is an operator's splice of an idle, errored or paused
// session's history. It clears the rejected-turn count.
func (s *Sessions) EditHistory(ctx context.Context, req *dexv1.EditHistoryRequest) (*dexv1.EditHistoryResponse, error) {
	if err := required("session_id", req.SessionId); err != nil {
		return nil, err
	}
	if req.TruncateFromSeq == 0 && req.Note == "" {
		return nil, status.Error(codes.InvalidArgument, "an edit names truncate_from_seq, a note, or both")
	}
	if err := s.limits.checkMessage(req.Note); err != nil {
		return nil, err
	}
	_, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{
		SessionId: req.SessionId, TruncateFromSeq: req.TruncateFromSeq, Note: req.Note,
	}}})
	if err != nil {
		return nil, err
	}
	out := &dexv1.EditHistoryResponse{}
	if sess := s.node.State().Session(req.SessionId); sess != nil {
		out.HistoryCount, out.HistorySize = sess.HistoryCount, sess.HistorySize
	}
	return out, nil
}
