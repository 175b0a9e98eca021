package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// peerStateTimeout bounds how long Status waits for one peer's NodeState.
const peerStateTimeout = time.Second

// Admin implements dexv1.AdminServiceServer.
type Admin struct {
	dexv1.UnimplementedAdminServiceServer
	node *cluster.Node
	log  *zap.Logger

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn

	health WorkerHealthSource // nil: this node keeps no Worker health
	// providers: the leader's providers report (nil: this node has none).
	providers ProviderSource
	live      LivenessView // nil: this node keeps no Worker contacts
	// partitions are every partition's group on this node (nil: node's
	// alone), for Status.
	partitions []*cluster.Node
}

// NewAdmin returns the admin handlers of node.
func NewAdmin(node *cluster.Node, log *zap.Logger) *Admin {
	if log == nil {
		log = zap.NewNop()
	}
	return &Admin{node: node, log: log, conns: map[string]*grpc.ClientConn{}}
}

func (a *Admin) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, c := range a.conns {
		c.Close()
		delete(a.conns, k)
	}
}

func (a *Admin) conn(addr string) (*grpc.ClientConn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, a.node.PeerDialOptions()...)
	if err != nil {
		return nil, err
	}
	a.conns[addr] = c
	return c, nil
}

func (a *Admin) nodeState() *dexv1.NodeStateResponse {
	st := a.node.Status()
	ready, reason := a.node.Ready()
	return &dexv1.NodeStateResponse{
		Id:           st.ID,
		State:        st.State,
		Term:         st.Term,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		LeaderId:     st.LeaderID,
		Workers:      a.workerHealth(),
		Providers:    a.providerStatus(),
		ClusterId:    a.node.ClusterID(),
		Ready:        ready,
		ReadyReason:  reason,
	}
}

// NodeState answers this node's own raft view.
func (a *Admin) NodeState(ctx context.Context, _ *dexv1.NodeStateRequest) (*dexv1.NodeStateResponse, error) {
	return a.nodeState(), nil
}

// Status answers from any node: the members from the raft configuration,
// their addresses from the replicated state, and each one's state asked in
// parallel.
func (a *Admin) Status(ctx context.Context, _ *dexv1.StatusRequest) (*dexv1.StatusResponse, error) {
	servers, err := a.node.Configuration()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "read the raft configuration: %v", err)
	}
	self := a.nodeState()
	infos := map[string]*dexv1.NodeInfo{}
	for _, ni := range a.node.State().Nodes() {
		infos[ni.Id] = ni.API()
	}
	out := &dexv1.StatusResponse{
		Leader:       self.LeaderId,
		Term:         self.Term,
		CommitIndex:  self.CommitIndex,
		AppliedIndex: self.AppliedIndex,
		AnsweredBy:   self.Id,
		Epoch:        a.node.State().Meta().GetEpoch(),
	}
	out.Partitions = a.partitionStatuses()
	out.Nodes = make([]*dexv1.NodeStatus, len(servers))
	states := make([]*dexv1.NodeStateResponse, len(servers)+1)
	states[len(servers)] = self
	var wg sync.WaitGroup
	for i, s := range servers {
		ns := &dexv1.NodeStatus{
			Id:          string(s.ID),
			RaftAddress: string(s.Address),
			Suffrage:    suffrage(s.Suffrage),
			State:       "unreachable",
		}
		if ni := infos[ns.Id]; ni != nil {
			ns.GrpcAddress = ni.GrpcAddress
		}
		out.Nodes[i] = ns
		if ns.Id == self.Id {
			fillState(ns, self)
			continue
		}
		if ns.GrpcAddress == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := a.conn(ns.GrpcAddress)
			if err != nil {
				return
			}
			cctx, cancel := context.WithTimeout(ctx, peerStateTimeout)
			defer cancel()
			r, err := dexv1.NewAdminServiceClient(c).NodeState(cctx, &dexv1.NodeStateRequest{})
			if err != nil || r.Id != ns.Id {
				return
			}
			fillState(ns, r)
			states[i] = r
		}()
	}
	wg.Wait()
	// The cluster's figures are the leader's when it answered.
	for _, ns := range out.Nodes {
		if ns.State == "leader" {
			out.Leader, out.Term, out.CommitIndex, out.AppliedIndex = ns.Id, ns.Term, ns.CommitIndex, ns.AppliedIndex
		}
	}
	ls := leaderState(out.Leader, states)
	out.Workers, out.Providers = ls.GetWorkers(), ls.GetProviders()
	out.StateSize = a.stateSize()
	return out, nil
}

func fillState(ns *dexv1.NodeStatus, r *dexv1.NodeStateResponse) {
	ns.State, ns.Term, ns.CommitIndex, ns.AppliedIndex = r.State, r.Term, r.CommitIndex, r.AppliedIndex
	ns.Ready, ns.ReadyReason = r.Ready, r.ReadyReason
}

func suffrage(s raft.ServerSuffrage) string {
	if s == raft.Voter {
		return "voter"
	}
	return "nonvoter"
}

// Join adds a node as a non-voter and records its addresses; the leader
// promotes it to voter once it has caught up (cluster/safe_membership.go).
// A node of another cluster, or one that does not answer at its gRPC
// address, is refused. Leader only.
func (a *Admin) Join(ctx context.Context, req *dexv1.JoinRequest) (*dexv1.JoinResponse, error) {
	if err := validateNode(req.GetNode()); err != nil {
		return nil, err
	}
	if err := a.leaderOnly(ctx); err != nil {
		return nil, err
	}
	n := req.GetNode()
	if err := a.node.CheckJoinClusterID(req.GetClusterId()); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if !a.node.IsMember(n.Id) {
		if _, ok := cluster.AskNodeState(ctx, n.GrpcAddress, n.Id, a.node.PeerDialOptions()...); !ok {
			return nil, status.Errorf(codes.FailedPrecondition, "node %s does not answer as itself at its gRPC address %s: a node joins by starting it with --join, which calls Join once it serves", n.Id, n.GrpcAddress)
		}
	}
	if err := a.node.AddNonvoter(ctx, n.Id, n.RaftAddress); err != nil {
		return nil, a.toStatus(ctx, err)
	}
	if a.node.Partition() > 0 {
		// The nodes table is partition 0's.
		a.log.Info("node joined a partition as a non-voter", zap.String("node", n.Id), zap.Int("partition", a.node.Partition()))
		return &dexv1.JoinResponse{ClusterId: a.node.ClusterID()}, nil
	}
	if err := a.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: fsmpb.NodeInfoFromAPI(n)}}}); err != nil {
		return nil, err
	}
	a.log.Info("node joined as a non-voter", zap.String("node", n.Id), zap.String("raft_address", n.RaftAddress))
	return &dexv1.JoinResponse{ClusterId: a.node.ClusterID()}, nil
}

// RegisterNode records a member's addresses. Leader only.
func (a *Admin) RegisterNode(ctx context.Context, req *dexv1.RegisterNodeRequest) (*dexv1.RegisterNodeResponse, error) {
	if err := validateNode(req.GetNode()); err != nil {
		return nil, err
	}
	if err := a.leaderOnly(ctx); err != nil {
		return nil, err
	}
	n := req.GetNode()
	servers, err := a.node.Configuration()
	if err != nil {
		return nil, a.toStatus(ctx, err)
	}
	found := false
	for _, s := range servers {
		if string(s.ID) == n.Id {
			found = true
			if string(s.Address) != n.RaftAddress {
				return nil, status.Errorf(codes.FailedPrecondition, "node %s has raft address %s in the cluster configuration, not %s", n.Id, s.Address, n.RaftAddress)
			}
		}
	}
	if !found {
		return nil, status.Errorf(codes.NotFound, "node %s is not a member of the cluster; join it first", n.Id)
	}
	if err := a.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: fsmpb.NodeInfoFromAPI(n)}}}); err != nil {
		return nil, err
	}
	return &dexv1.RegisterNodeResponse{}, nil
}

// RemoveNode removes a member and its recorded addresses. Leader only.
func (a *Admin) RemoveNode(ctx context.Context, req *dexv1.RemoveNodeRequest) (*dexv1.RemoveNodeResponse, error) {
	id := req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "node_id is required")
	}
	if err := a.leaderOnly(ctx); err != nil {
		return nil, err
	}
	if !a.node.IsMember(id) {
		return nil, status.Errorf(codes.NotFound, "node %s is not a member of the cluster", id)
	}
	if !req.GetForce() {
		if err := a.node.CheckRemoval(ctx, id); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
	}
	// Forget the addresses first: a leader removing itself stops leading.
	// They are partition 0's.
	if a.node.Partition() == 0 {
		err := a.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_RemoveNode{RemoveNode: &fsmpb.RemoveNode{NodeId: id}}})
		if err != nil && status.Code(err) != codes.NotFound {
			return nil, err
		}
	}
	if err := a.node.RemoveServer(ctx, id); err != nil {
		return nil, a.toStatus(ctx, err)
	}
	a.log.Info("node removed", zap.String("node", id))
	return &dexv1.RemoveNodeResponse{}, nil
}

// TransferLeadership hands leadership to a voter. Leader only.
func (a *Admin) TransferLeadership(ctx context.Context, req *dexv1.TransferLeadershipRequest) (*dexv1.TransferLeadershipResponse, error) {
	if err := a.leaderOnly(ctx); err != nil {
		return nil, err
	}
	if id := req.GetNodeId(); id != "" && !a.node.IsMember(id) {
		return nil, status.Errorf(codes.NotFound, "node %s is not a member of the cluster", id)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	newLeader, err := a.node.TransferLeadership(cctx, req.GetNodeId())
	if err != nil {
		return nil, a.toStatus(ctx, err)
	}
	return &dexv1.TransferLeadershipResponse{NewLeader: newLeader}, nil
}

func validateNode(n *dexv1.NodeInfo) error {
	if n == nil {
		return status.Error(codes.InvalidArgument, "node is required")
	}
	if n.Id == "" {
		return status.Error(codes.InvalidArgument, "node.id is required")
	}
	if err := cluster.ValidateAddr(n.RaftAddress); err != nil {
		return status.Errorf(codes.InvalidArgument, "node.raft_address: %v", err)
	}
	if err := cluster.ValidateAddr(n.GrpcAddress); err != nil {
		return status.Errorf(codes.InvalidArgument, "node.grpc_address: %v", err)
	}
	if n.HttpAddress != "" {
		if err := cluster.ValidateAddr(n.HttpAddress); err != nil {
			return status.Errorf(codes.InvalidArgument, "node.http_address: %v", err)
		}
	}
	return nil
}

// leaderOnly refuses a write on a follower with Unavailable, naming the
// leader in the message and its gRPC address in the "dex-leader" trailer.
func (a *Admin) leaderOnly(ctx context.Context) error {
	if a.node.IsLeader() {
		return nil
	}
	return a.notLeader(ctx, a.node.NotLeader())
}

func (a *Admin) notLeader(ctx context.Context, e *cluster.NotLeaderError) error {
	if e.LeaderGRPCAddr != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(cluster.LeaderMetadataKey, e.LeaderGRPCAddr))
	}
	return status.Error(codes.Unavailable, e.Error())
}

func (a *Admin) toStatus(ctx context.Context, err error) error {
	var nl *cluster.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return a.notLeader(ctx, nl)
	case errors.Is(err, cluster.ErrNotMember):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.FailedPrecondition, err.Error())
}

func (a *Admin) propose(ctx context.Context, cmd *fsmpb.Command) error {
	res, err := a.node.Propose(ctx, cmd)
	if err != nil {
		return a.toStatus(ctx, err)
	}
	if res.Err != nil {
		return RejectionStatus(res.Err)
	}
	return nil
}

// RejectionStatus maps a state machine rejection to a gRPC status.
func RejectionStatus(r *fsm.Rejection) error {
	code := codes.FailedPrecondition
	switch r.Code {
	case fsm.CodeInvalid:
		code = codes.InvalidArgument
	case fsm.CodeNotFound:
		code = codes.NotFound
	case fsm.CodeAlreadyExists:
		code = codes.AlreadyExists
	case fsm.CodeResourceExhausted:
		code = codes.ResourceExhausted
	}
	return status.Error(code, fmt.Sprintf("%s", r.Reason))
}

// partitionStatuses is each partition's group as this node sees it.
func (a *Admin) partitionStatuses() []*dexv1.PartitionStatus {
	nodes := a.partitions
	if nodes == nil {
		nodes = []*cluster.Node{a.node}
	}
	out := make([]*dexv1.PartitionStatus, len(nodes))
	for k, n := range nodes {
		st := n.Status()
		ps := &dexv1.PartitionStatus{
			Id: uint32(k), Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
			Epoch: n.State().Meta().GetEpoch(), State: st.State,
		}
		if l := n.Leader(); l != nil {
			ps.Leader, ps.LeaderGrpcAddress = l.Id, l.GrpcAddress
		}
		if servers, err := n.Configuration(); err == nil {
			for _, s := range servers {
				if s.Suffrage == raft.Voter {
					ps.Voters = append(ps.Voters, string(s.ID))
				} else {
					ps.Nonvoters = append(ps.Nonvoters, string(s.ID))
				}
			}
		}
		out[k] = ps
	}
	return out
}
