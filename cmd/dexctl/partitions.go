package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// partitionStatusJSON is one partition's raft group in `status --json`, as
// the answering node sees it. Leader is the leading node's id ("" when none
// is known); State is the answering node's role in the group.
type partitionStatusJSON struct {
	ID                uint32   `json:"id"`
	Leader            string   `json:"leader"`
	LeaderGRPCAddress string   `json:"leader_grpc_address"`
	Term              uint64   `json:"term"`
	CommitIndex       uint64   `json:"commit_index"`
	AppliedIndex      uint64   `json:"applied_index"`
	Epoch             uint64   `json:"epoch"`
	State             string   `json:"state"`
	Voters            []string `json:"voters"`
	Nonvoters         []string `json:"nonvoters"`
}

func partitionsJSON(ps []*dexv1.PartitionStatus) []partitionStatusJSON {
	out := []partitionStatusJSON{}
	for _, p := range ps {
		out = append(out, partitionStatusJSON{
			ID: p.Id, Leader: p.Leader, LeaderGRPCAddress: p.LeaderGrpcAddress, Term: p.Term,
			CommitIndex: p.CommitIndex, AppliedIndex: p.AppliedIndex, Epoch: p.Epoch, State: p.State,
			Voters: append([]string{}, p.Voters...), Nonvoters: append([]string{}, p.Nonvoters...),
		})
	}
	return out
}

// printPartitions lists each partition's leader and indexes; nothing for a
// cluster of one partition, whose figures are the status line's.
func printPartitions(w io.Writer, ps []*dexv1.PartitionStatus) {
	if len(ps) <= 1 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tTERM\tCOMMIT\tAPPLIED\tEPOCH")
	for _, p := range ps {
		leader := p.Leader
		if leader == "" {
			leader = "(none)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\n", p.Id, leader, p.Term, p.CommitIndex, p.AppliedIndex, p.Epoch)
	}
	tw.Flush()
}

// partitionCount is the cluster's number of partitions, from Status on
// the first node that answers; 0 when none does (or the token may not ask),
// which callers take as unknown and show no partitions.
func (g *globals) partitionCount(ctx context.Context) int {
	n := 0
	_ = g.anyNode(ctx, func(ctx context.Context, c dexv1.AdminServiceClient) error {
		r, err := c.Status(ctx, &dexv1.StatusRequest{})
		if err == nil {
			n = len(r.Partitions)
		}
		return err
	})
	return n
}
