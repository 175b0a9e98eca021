package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Safe membership, as Consul's autopilot does it: a joining node comes in
// as a non-voter, so it can never cost the cluster its quorum, and the
// leader promotes it to voter once it answers and its log has kept up with
// the leader's for promoteStable; no change is made that would leave the
// voters that answer short of a majority.
const (
	// promoteLag: how many entries behind the leader's last index a
	// non-voter may be and still count as caught up.
	promoteLag = 64
	// promoteStable: how long a non-voter must stay caught up.
	promoteStable = 3 * time.Second
	// promoteEvery: how often the leader looks at its non-voters.
	promoteEvery = 500 * time.Millisecond
	// probeTimeout bounds one NodeState call to a member.
	probeTimeout = time.Second
)

// AddNonvoter adds a node as a non-voter (the leader promotes it later). A
// member with the same id and address is left as it is. Leader only.
func (n *Node) AddNonvoter(ctx context.Context, id, raftAddr string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	servers, err := n.Configuration()
	if err != nil {
		return err
	}
	for _, s := range servers {
		switch {
		case string(s.ID) == id && string(s.Address) == raftAddr:
			return nil // joining twice is fine
		case string(s.ID) == id:
			return fmt.Errorf("node %s is a member with raft address %s: remove it first (dexctl node remove %s) to join it at %s", id, s.Address, id, raftAddr)
		case string(s.Address) == raftAddr:
			return fmt.Errorf("raft address %s is already used by node %s", raftAddr, s.ID)
		}
	}
	return n.raftErr(n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeoutOf(ctx)).Error())
}

// CheckRemoval refuses to remove a voter when the voters left that answer
// would not be a majority of the voters left.
func (n *Node) CheckRemoval(ctx context.Context, id string) error {
	servers, err := n.Configuration()
	if err != nil {
		return err
	}
	var left []raft.Server
	removesVoter := false
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		if string(s.ID) == id {
			removesVoter = true
			continue
		}
		left = append(left, s)
	}
	if !removesVoter {
		return nil
	}
	if len(left) == 0 {
		return fmt.Errorf("node %s is the last voter: removing it leaves no cluster (use --force to remove it anyway)", id)
	}
	up := n.reachable(ctx, left)
	if up*2 <= len(left) {
		voters := fmt.Sprintf("%d voters", len(left))
		if len(left) == 1 {
			voters = "1 voter"
		}
		return fmt.Errorf("removing node %s would leave %s with %d answering, not a majority: the cluster would stop; bring the others back first, or use --force", id, voters, up)
	}
	return nil
}

// reachable counts the servers that answer NodeState with their own id
// (this node counts without asking).
func (n *Node) reachable(ctx context.Context, servers []raft.Server) int {
	var (
		mu sync.Mutex
		up int
		wg sync.WaitGroup
	)
	for _, s := range servers {
		if string(s.ID) == n.cfg.ID {
			up++
			continue
		}
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			if _, ok := n.askNodeState(ctx, id); ok {
				mu.Lock()
				up++
				mu.Unlock()
			}
		}(string(s.ID))
	}
	wg.Wait()
	return up
}

// askNodeState asks a member, at the gRPC address the state records for
// it, for its raft view.
func (n *Node) askNodeState(ctx context.Context, id string) (*dexv1.NodeStateResponse, bool) {
	info := n.nodeInfo(id)
	if info == nil || info.GrpcAddress == "" {
		return nil, false
	}
	if n.cfg.partition > 0 {
		// The member answers with its view of this partition's group.
		ctx = metadata.AppendToOutgoingContext(ctx, PartitionMetadataKey, strconv.Itoa(int(n.cfg.partition)))
	}
	return AskNodeState(ctx, info.GrpcAddress, id, n.PeerDialOptions()...)
}

// AskNodeState asks the node at grpcAddr for its raft view; ok only when
// it answers in time as node id.
// creds, when given, replace plaintext (Node.DialCredentials) and may add
// per-call credentials (Node.PeerDialOptions).
func AskNodeState(ctx context.Context, grpcAddr, id string, creds ...grpc.DialOption) (*dexv1.NodeStateResponse, bool) {
	conn, err := grpc.NewClient(grpcAddr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, creds...)...)
	if err != nil {
		return nil, false
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	r, err := dexv1.NewAdminServiceClient(conn).NodeState(cctx, &dexv1.NodeStateRequest{})
	if err != nil || r.GetId() != id {
		return nil, false
	}
	return r, true
}

// membershipService is the leader's part of safe membership: it records
// the cluster id and promotes caught-up non-voters.
type membershipService struct {
	n      *Node
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *membershipService) EstablishLeadership(ctx context.Context, _ uint64) error {
	if m.n.cfg.partition == 0 {
		if err := m.n.ensureClusterID(ctx); err != nil {
			return err
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.mu.Lock()
	m.cancel, m.done = cancel, done
	m.mu.Unlock()
	go func() {
		defer close(done)
		m.n.promoteLoop(lctx)
	}()
	return nil
}

func (m *membershipService) RevokeLeadership() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.cancel, m.done = nil, nil
	m.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (n *Node) promoteLoop(ctx context.Context) {
	since := map[raft.ServerID]time.Time{} // caught up without a break since
	tick := time.NewTicker(promoteEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !n.IsLeader() {
			continue
		}
		servers, err := n.Configuration()
		if err != nil {
			continue
		}
		for _, s := range servers {
			if s.Suffrage != raft.Nonvoter {
				continue
			}
			r, ok := n.askNodeState(ctx, string(s.ID))
			last := n.raft.LastIndex()
			if !ok || r.CommitIndex+promoteLag < last || (r.ClusterId != "" && r.ClusterId != n.ident.ID()) {
				delete(since, s.ID)
				continue
			}
			if _, seen := since[s.ID]; !seen {
				since[s.ID] = time.Now()
			}
			if time.Since(since[s.ID]) < promoteStable {
				continue
			}
			if err := n.promote(ctx, s, servers); err != nil {
				n.log.Warn("non-voter not promoted", zap.String("node", string(s.ID)), zap.Error(err))
				delete(since, s.ID)
				continue
			}
			n.log.Info("non-voter caught up; promoted to voter", zap.String("node", string(s.ID)))
			break // the configuration changed: read it again next tick
		}
	}
}

// promote makes a caught-up non-voter a voter when the voters that answer,
// with it, are a majority of the voters after the change.
func (n *Node) promote(ctx context.Context, s raft.Server, servers []raft.Server) error {
	var voterList []raft.Server
	for _, v := range servers {
		if v.Suffrage == raft.Voter {
			voterList = append(voterList, v)
		}
	}
	up := n.reachable(ctx, voterList) + 1
	after := len(voterList) + 1
	if up*2 <= after {
		return fmt.Errorf("only %d of the %d voters it would make answer", up, after)
	}
	return n.raftErr(n.raft.AddVoter(s.ID, s.Address, 0, timeoutOf(ctx)).Error())
}
