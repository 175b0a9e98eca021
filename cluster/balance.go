package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Each node of a Host balances the partition leaderships it holds: while it
// leads more than ⌈partitions / voters⌉, it hands one of them (raft
// leadership transfer) to the voter that leads the fewest. Every node acts
// only on its own leaderships, so no node moves another's, and the spread
// settles once every node is up, after a node returns and after a drain
// (docs/design/partitions.md).

// DefaultBalanceInterval is how often a node checks the spread.
const DefaultBalanceInterval = 2 * time.Second

// balanceCooldown is how long a voter that does not answer, lags, or did
// not take a leadership is passed over.
const balanceCooldown = 5 * time.Second

// leadershipPlan is one transfer: partition k to node to.
type leadershipPlan struct {
	k  int
	to string
}

// planTransfer returns the transfer that brings self toward its share,
// from leaders (the leader's id of each partition, "" when none) and the
// voters that may take one; ok is false when self leads no more than its
// share or no voter can take one.
func planTransfer(self string, leaders []string, voters []string) (leadershipPlan, bool) {
	if len(voters) == 0 {
		return leadershipPlan{}, false
	}
	share := (len(leaders) + len(voters) - 1) / len(voters)
	count := map[string]int{}
	var mine []int
	for k, id := range leaders {
		count[id]++
		if id == self {
			mine = append(mine, k)
		}
	}
	if len(mine) <= share {
		return leadershipPlan{}, false
	}
	to := ""
	for _, v := range slices.Sorted(slices.Values(voters)) {
		if v != self && (to == "" || count[v] < count[to]) {
			to = v
		}
	}
	// A move to a voter that would then lead as many as self does not
	// spread anything.
	if to == "" || count[to]+1 >= len(mine) {
		return leadershipPlan{}, false
	}
	// Partition 0 holds the registry; it moves last.
	return leadershipPlan{k: mine[len(mine)-1], to: to}, true
}

// balanceLoop runs the balancer until stop closes.
func (h *Host) balanceLoop(stop <-chan struct{}, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	cooling := map[string]time.Time{}
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		h.balanceOnce(cooling)
	}
}

// balanceOnce makes at most one transfer.
func (h *Host) balanceOnce(cooling map[string]time.Time) {
	registry := h.nodes[0]
	servers, err := registry.Configuration()
	if err != nil {
		return
	}
	var voters []string
	for _, s := range servers {
		if s.Suffrage == raft.Voter && time.Now().After(cooling[string(s.ID)]) {
			voters = append(voters, string(s.ID))
		}
	}
	leaders := make([]string, len(h.nodes))
	for k, n := range h.nodes {
		if l := n.Leader(); l != nil {
			leaders[k] = l.Id
		}
		if n.IsLeader() {
			if ok, _ := n.Ready(); !ok {
				return // a leadership still being established, or a drain
			}
		}
	}
	plan, ok := planTransfer(registry.ID(), leaders, voters)
	if !ok {
		return
	}
	n := h.nodes[plan.k]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A transfer holds the partition's writes until the target takes over
	// or the transfer times out: ask the target first (at the address the
	// nodes table records for it) that it is up and has the partition's
	// log, so a dead or lagging node costs nothing.
	if info := n.nodeInfo(plan.to); info != nil && info.GrpcAddress != "" {
		if st, ok := n.askNodeState(ctx, plan.to); !ok || st.AppliedIndex+promoteLag < n.raft.LastIndex() {
			cooling[plan.to] = time.Now().Add(balanceCooldown)
			return
		}
	}
	got, err := n.TransferLeadership(ctx, plan.to)
	if err != nil || got != plan.to {
		cooling[plan.to] = time.Now().Add(balanceCooldown)
		n.log.Info("handing a partition's leadership over to spread the leaders failed; trying another node later",
			zap.Int("partition", plan.k), zap.String("to", plan.to), zap.String("new_leader", got), zap.Error(err))
		return
	}
	n.log.Info("handed a partition's leadership over to spread the leaders", zap.Int("partition", plan.k), zap.String("to", plan.to))
}
