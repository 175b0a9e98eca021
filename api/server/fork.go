package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// ForkSession creates a session whose history is a copy of the source's up
// to and including at_seq (docs/forks.md). Every check runs on this node's
// state before anything is proposed, so a refused fork changes nothing;
// Apply checks the fork point again against the state it applies to. The
// proposals then run to their end whatever the client does, as an
// import's: a change of leader meanwhile cuts the fork and the new leader
// discards it.
func (s *Sessions) ForkSession(ctx context.Context, req *dexv1.ForkSessionRequest) (*dexv1.ForkSessionResponse, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := required("source_session_id", req.SourceSessionId); err != nil {
		return nil, err
	}
	if err := s.limits.checkMessage(req.Message); err != nil {
		return nil, err
	}
	if !s.node.MembersApply(fsm.ForkLogVersion) {
		return nil, status.Errorf(codes.FailedPrecondition, "a member of the cluster runs a Dex that cannot apply a fork (log version below %d): upgrade every node, then fork", fsm.ForkLogVersion)
	}
	id, err := s.placeFork(req)
	if err != nil {
		return nil, err
	}
	o := fsm.ForkOptions{ID: id, Agent: req.Agent, Provider: s.providers[req.Agent], Message: req.Message}
	if len(req.Labels) > 0 {
		o.Labels = labelsFromAPI(req.Labels)
	}
	if req.Message != "" {
		o.MessageID = id + "/first"
	}
	st := s.node.State()
	if st.Session(id) != nil {
		return nil, status.Errorf(codes.AlreadyExists, "session %q already exists", id)
	}
	begin, pages, end, r := st.ForkCommands(req.SourceSessionId, req.AtSeq, o, s.node.Epoch())
	if r != nil {
		return nil, RejectionStatus(r)
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_ForkSessionBegin{ForkSessionBegin: begin}}); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(context.Background(), importTimeout)
	defer cancel()
	for _, p := range pages {
		if _, err := s.propose(pctx, &fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: p}}); err != nil {
			return nil, cutFork(id, err)
		}
	}
	if _, err := s.propose(pctx, &fsmpb.Command{Body: &fsmpb.Command_ForkSessionEnd{ForkSessionEnd: end}}); err != nil {
		return nil, cutFork(id, err)
	}
	return &dexv1.ForkSessionResponse{Session: s.node.State().Session(id).API()}, nil
}

// cutFork is the answer to a fork whose proposals stopped after its Begin:
// Aborted, as a cut import's (cutImport).
func cutFork(id string, err error) error {
	return status.Errorf(codes.Aborted, "the fork %s was cut by a change of leader (%s): the new leader discards it; fork again once it is gone", id, status.Convert(err).Message())
}

// placeFork is the fork's id: the one asked for, or a new one. A fork
// lives in its source's partition, which serves this call, so an id of
// another partition is refused.
func (s *Sessions) placeFork(req *dexv1.ForkSessionRequest) (string, error) {
	switch {
	case req.SessionId == "" && s.partitions <= 1:
		return wirerules.NewSessionID(), nil
	case req.SessionId == "":
		return wirerules.NewSessionIDIn(s.partition, s.partitions), nil
	}
	if r := fsm.CheckID("session id", req.SessionId); r != nil {
		return "", RejectionStatus(r)
	}
	if s.partitions > 1 {
		if got := wirerules.PartitionOf(req.SessionId, s.partitions); got != s.partition {
			return "", status.Errorf(codes.InvalidArgument, "session id %q lives in partition %d of %d, not in the partition of session %s (%d): a fork lives in its source's partition; leave session_id empty and the cluster draws an id that does",
				req.SessionId, got, s.partitions, req.SourceSessionId, s.partition)
		}
	}
	return req.SessionId, nil
}
