package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// LeaderMetadataKey is the gRPC trailer a follower sets on a refused write:
// the leader's gRPC address.
const LeaderMetadataKey = "dex-leader"

// PartitionMetadataKey names, on a call to a node of several partitions,
// the partition the call is for (absent: 0).
const PartitionMetadataKey = "dex-partition"

// ErrNotMember is returned for a membership operation on an unknown node.
var ErrNotMember = errors.New("not a member of the cluster")

// AddVoter adds (or re-addresses) a voter. Leader only.
func (n *Node) AddVoter(ctx context.Context, id, raftAddr string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	servers, err := n.Configuration()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if string(s.ID) == id && string(s.Address) == raftAddr && s.Suffrage == raft.Voter {
			return nil // already there: joining twice is fine
		}
		if string(s.ID) != id && string(s.Address) == raftAddr {
			return fmt.Errorf("raft address %s is already used by node %s", raftAddr, s.ID)
		}
	}
	return n.raftErr(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeoutOf(ctx)).Error())
}

// RemoveServer removes a member. Leader only.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	if !n.IsMember(id) {
		return fmt.Errorf("node %s: %w", id, ErrNotMember)
	}
	return n.raftErr(n.raft.RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx)).Error())
}

// TransferLeadership hands leadership to id (any voter when empty) and
// returns the new leader's id.
func (n *Node) TransferLeadership(ctx context.Context, id string) (string, error) {
	if !n.IsLeader() {
		return "", n.notLeader()
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		if id == n.cfg.ID {
			return id, nil
		}
		servers, err := n.Configuration()
		if err != nil {
			return "", err
		}
		var target *raft.Server
		for i := range servers {
			if string(servers[i].ID) == id {
				target = &servers[i]
			}
		}
		if target == nil {
			return "", fmt.Errorf("node %s: %w", id, ErrNotMember)
		}
		if target.Suffrage != raft.Voter {
			return "", fmt.Errorf("node %s is not a voter", id)
		}
		f = n.raft.LeadershipTransferToServer(target.ID, target.Address)
	}
	if err := f.Error(); err != nil {
		return "", fmt.Errorf("leadership transfer: %w", err)
	}
	for {
		if _, lid := n.raft.LeaderWithID(); lid != "" && string(lid) != n.cfg.ID {
			return string(lid), nil
		}
		select {
		case <-ctx.Done():
			return "", nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// IsMember reports whether id is in the raft configuration.
func (n *Node) IsMember(id string) bool {
	servers, err := n.Configuration()
	if err != nil {
		return false
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

func (n *Node) raftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return n.notLeader()
	}
	return err
}

func timeoutOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
	}
	return 10 * time.Second
}

// Join asks a running cluster, through the member at addr, to add this node
// as a voter. It follows a follower's pointer to the leader and retries until
// ctx ends.
func (n *Node) Join(ctx context.Context, addr string) error {
	target := addr
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("join through %s: no leader accepted this node: %v", addr, lastErr)
			case <-time.After(backoff(attempt)):
			}
		}
		leader, err := n.callJoin(ctx, target)
		if err == nil {
			n.log.Info("joined the cluster", zap.String("through", target))
			n.needsJoin.Store(false)
			return nil
		}
		lastErr = err
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			if leader != "" && leader != target {
				n.log.Info("join: following the leader", zap.String("leader", leader))
				target = leader
				attempt = 0
				continue
			}
			n.log.Info("join: retrying", zap.String("address", target), zap.Error(err))
			if leader == "" && target != addr {
				target = addr // the leader we followed went away; start over
			}
		default:
			return fmt.Errorf("join through %s refused: %s", target, status.Convert(err).Message())
		}
	}
}

func (n *Node) callJoin(ctx context.Context, target string) (leader string, err error) {
	conn, err := grpc.NewClient(target, n.PeerDialOptions()...)
	if err != nil {
		return "", status.Error(codes.InvalidArgument, err.Error())
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var trailer metadata.MD
	resp, err := dexv1.NewAdminServiceClient(conn).Join(cctx, &dexv1.JoinRequest{Node: n.Info().API(), ClusterId: n.ident.ID()}, grpc.Trailer(&trailer))
	if v := trailer.Get(LeaderMetadataKey); len(v) > 0 {
		leader = v[0]
	}
	if err == nil && resp.GetClusterId() != "" {
		if ierr := n.ident.Accept(resp.GetClusterId(), target, "join answer from"); ierr != nil {
			return "", status.Error(codes.FailedPrecondition, ierr.Error())
		}
	}
	return leader, err
}

// registerLoop makes sure a follower's addresses are in the replicated state:
// when they are missing or stale it asks the leader to record them.
func (n *Node) registerLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.RegisterInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.shutdownCh:
			return
		case <-tick.C:
		}
		if n.raft.State() != raft.Follower || n.fsm.Halted() != nil {
			continue
		}
		if proto.Equal(n.nodeInfo(n.cfg.ID), n.Info()) || !n.IsMember(n.cfg.ID) {
			continue
		}
		leader := n.Leader()
		if leader == nil || leader.GrpcAddress == "" {
			continue
		}
		if err := n.registerWith(leader.GrpcAddress); err != nil {
			n.log.Info("registering this node's addresses with the leader failed", zap.String("leader", leader.Id), zap.Error(err))
		} else {
			n.log.Info("registered this node's addresses with the leader", zap.String("leader", leader.Id))
		}
	}
}

func (n *Node) registerWith(addr string) error {
	conn, err := grpc.NewClient(addr, n.PeerDialOptions()...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = dexv1.NewAdminServiceClient(conn).RegisterNode(ctx, &dexv1.RegisterNodeRequest{Node: n.Info().API()})
	return err
}
