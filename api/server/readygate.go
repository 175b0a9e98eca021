package server

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// readyGate gates the client and Worker services: only the node that holds
// the dispatch lease serves them.
type readyGate struct {
	node *cluster.Node
	p    Proposer // nil: the node
}

// Proposer commits a command through raft (the leader's pipeline).
type Proposer interface {
	Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error)
}

// check answers Unavailable, naming the leader, unless this node is ready.
func (l readyGate) check(ctx context.Context) error {
	if ready, reason := l.node.Ready(); !ready {
		return l.unavailable(ctx, reason)
	}
	return nil
}

// checkAttempt is check for the Worker calls of an attempt already running
// (claim, heartbeat, complete, fail): a draining leader still serves them,
// so that attempts finish on the node that holds their deadlines.
func (l readyGate) checkAttempt(ctx context.Context) error {
	if ok, reason := l.node.ServesAttempts(); !ok {
		return l.unavailable(ctx, reason)
	}
	return nil
}

func (l readyGate) unavailable(ctx context.Context, reason string) error {
	e := l.node.NotLeader()
	if e.LeaderGRPCAddr != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(cluster.LeaderMetadataKey, e.LeaderGRPCAddr))
	}
	msg := e.Error()
	switch {
	case l.node.IsLeader() && strings.HasPrefix(reason, "draining"):
		msg = "this node leads but is " + reason
	case l.node.IsLeader() && reason != "":
		msg = "this node leads but does not serve yet: " + reason
	}
	return status.Error(codes.Unavailable, msg)
}

// propose commits a command and turns every failure into a gRPC status.
func (l readyGate) propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	return l.commit(ctx, cmd)
}

// proposeAttempt is propose for the Worker calls of a running attempt.
func (l readyGate) proposeAttempt(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	if err := l.checkAttempt(ctx); err != nil {
		return nil, err
	}
	return l.commit(ctx, cmd)
}

func (l readyGate) commit(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	var p Proposer = l.node
	if l.p != nil {
		p = l.p
	}
	res, err := p.Propose(ctx, cmd)
	if err != nil {
		return nil, l.proposeError(ctx, err)
	}
	if res.Err != nil {
		return res, RejectionStatus(res.Err)
	}
	return res, nil
}

func (l readyGate) proposeError(ctx context.Context, err error) error {
	var nl *cluster.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return l.unavailable(ctx, "")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unavailable, err.Error())
}

func required(what, v string) error {
	if v == "" {
		return status.Errorf(codes.InvalidArgument, "%s is required", what)
	}
	return nil
}
