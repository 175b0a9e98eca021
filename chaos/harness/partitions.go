package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A cluster of several partitions (dexd --partitions N, docs/design/partitions.md)
// has a leader per partition, and every healthy node answers /readyz 200:
// "the one ready node" no longer finds a leader. These helpers ask the
// nodes instead, through AdminService Status, with the cluster's TLS and
// admin token.

// partitionArgs are the dexd flags for n partitions: none for 0 or 1.
func partitionArgs(n int) []string {
	if n <= 1 {
		return nil
	}
	return []string{"--partitions", strconv.Itoa(n)}
}

// Partitions is the number of partitions of the cluster (1 without
// ClusterOptions.Partitions).
func (c *Cluster) Partitions() int { return max(c.opts.Partitions, 1) }

// Node is the node of that id (nil: none).
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// PartitionStatus asks n for every partition's status as n sees it.
func (c *Cluster) PartitionStatus(ctx context.Context, n *Node) ([]*dexv1.PartitionStatus, error) {
	conn, err := grpc.NewClient(n.GRPCAddr, c.ConnOptions()...)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Status waits up to a second for each peer's own state, and a stopped
	// peer never answers: leave it time to give up on one.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := dexv1.NewAdminServiceClient(conn).Status(ctx, &dexv1.StatusRequest{})
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", n.ID, err)
	}
	return st.Partitions, nil
}

// PartitionLeaders asks n which node leads each partition: one id per
// partition, "" where n knows no leader.
func (c *Cluster) PartitionLeaders(ctx context.Context, n *Node) ([]string, error) {
	parts, err := c.PartitionStatus(ctx, n)
	if err != nil {
		return nil, err
	}
	ids, err := leaderIDs(parts, c.Partitions())
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", n.ID, err)
	}
	return ids, nil
}

// PartitionLeader is the running node that leads partition k, as the first
// running node that names one sees it.
func (c *Cluster) PartitionLeader(ctx context.Context, k int) (*Node, error) {
	if k < 0 || k >= c.Partitions() {
		return nil, fmt.Errorf("partition %d of %d", k, c.Partitions())
	}
	var errs []string
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		ids, err := c.PartitionLeaders(ctx, n)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if l := c.Node(ids[k]); l != nil && l.Running() {
			return l, nil
		}
		errs = append(errs, fmt.Sprintf("%s knows no running leader of partition %d (%q)", n.ID, k, ids[k]))
	}
	return nil, fmt.Errorf("no leader of partition %d: %s", k, strings.Join(errs, "; "))
}

// WaitPartitions waits until every running node answers /readyz 200 (with
// ACLs: takes the admin token) and names the same running node as the
// leader of each partition, and returns the leader of partition k.
func (c *Cluster) WaitPartitions(ctx context.Context, k int) (*Node, error) {
	return c.waitPartitions(ctx, k, false)
}

// WaitSpread is WaitPartitions until, besides, the leaderships are spread:
// no running node leads more than ⌈partitions / running nodes⌉ of them,
// as dexd's balancer leaves them once every node is up (with 3 partitions
// on 3 nodes, one each).
func (c *Cluster) WaitSpread(ctx context.Context, k int) (*Node, error) {
	return c.waitPartitions(ctx, k, true)
}

func (c *Cluster) waitPartitions(ctx context.Context, k int, spread bool) (*Node, error) {
	if k < 0 || k >= c.Partitions() {
		return nil, fmt.Errorf("partition %d of %d", k, c.Partitions())
	}
	for {
		leaders, why := c.partitionsServed(ctx, spread)
		if why == "" {
			return c.Node(leaders[k]), nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the cluster does not serve its %d partitions: %s: %w", c.Partitions(), why, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// partitionsServed is the agreed leader of each partition, or why the
// running nodes do not serve them yet.
func (c *Cluster) partitionsServed(ctx context.Context, spread bool) ([]string, string) {
	var running []string
	var views [][]string
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		if !n.Ready() {
			return nil, n.ID + " is not ready"
		}
		if !c.tokenWorks(ctx, n) {
			return nil, n.ID + " does not take the admin token yet"
		}
		ids, err := c.PartitionLeaders(ctx, n)
		if err != nil {
			return nil, err.Error()
		}
		running = append(running, n.ID)
		views = append(views, ids)
	}
	return judgeLeaders(views, running, spread)
}

// leaderIDs reads the leader of each of n partitions from a Status answer:
// one entry per partition, in order of id; "" where none is known.
func leaderIDs(parts []*dexv1.PartitionStatus, n int) ([]string, error) {
	if len(parts) != n {
		return nil, fmt.Errorf("%d partitions in the status; the cluster has %d (is every dexd run with --partitions %d?)", len(parts), n, n)
	}
	ids := make([]string, n)
	for i, p := range parts {
		if int(p.Id) != i {
			return nil, fmt.Errorf("partition %d listed at position %d", p.Id, i)
		}
		ids[i] = p.Leader
	}
	return ids, nil
}

// judgeLeaders judges the running nodes' views of the leaders (views[i] is
// running[i]'s): they must agree, name a running node for every
// partition and, with spread, give none more than its share. It returns
// the leaders, or why they do not serve.
func judgeLeaders(views [][]string, running []string, spread bool) ([]string, string) {
	if len(views) == 0 {
		return nil, "no node is running"
	}
	first := views[0]
	for i, v := range views[1:] {
		if strings.Join(v, ",") != strings.Join(first, ",") {
			return nil, fmt.Sprintf("%s sees leaders %v, %s sees %v", running[0], first, running[i+1], v)
		}
	}
	led := map[string]int{}
	for k, id := range first {
		if !slices.Contains(running, id) {
			return nil, fmt.Sprintf("partition %d has no running leader (%q)", k, id)
		}
		led[id]++
	}
	if spread {
		share := (len(first) + len(running) - 1) / len(running)
		for _, id := range running {
			if led[id] > share {
				return nil, fmt.Sprintf("%s leads %d partitions, more than its share of %d: %v", id, led[id], share, first)
			}
		}
	}
	return first, ""
}
