package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/metadata"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func newNodeCmd(g *globals) *cobra.Command {
	// Membership changes wait for raft; give them more than a status call.
	slow := func() *globals {
		s := *g
		if s.timeout < 15*time.Second {
			s.timeout = 15 * time.Second
		}
		return &s
	}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Manage cluster members",
	}
	var partition int
	transfer := &cobra.Command{
		Use:   "transfer-leadership [ID]",
		Short: "Hand leadership to node ID (any voter when omitted); of a partition with --partition",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &dexv1.TransferLeadershipRequest{}
			if len(args) == 1 {
				req.NodeId = args[0]
			}
			if partition < 0 {
				return usagef("--partition must not be negative")
			}
			var resp *dexv1.TransferLeadershipResponse
			err := slow().leader(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
				if partition > 0 {
					ctx = metadata.AppendToOutgoingContext(ctx, partitionKey, strconv.Itoa(partition))
				}
				r, err := c.TransferLeadership(ctx, req)
				resp = r
				return err
			})
			if err != nil {
				return err
			}
			if resp.NewLeader != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "leadership transferred to %s\n", resp.NewLeader)
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "leadership transfer started")
			}
			return nil
		},
	}
	transfer.Flags().IntVar(&partition, "partition", 0, "the partition whose leadership moves, in a cluster of several (the balancer moves it back when the node then leads more than its share)")
	cmd.AddCommand(transfer, removeCmd(g, slow))
	return cmd
}

// partitionKey names the partition of a call, in a cluster of several.
const partitionKey = "dex-partition"

func removeCmd(g *globals, slow func() *globals) *cobra.Command {
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove node ID from the cluster",
		Long: "Remove node ID from the cluster. A voter that answers is removed only with --yes: the\n" +
			"cluster then survives fewer failures. Refused when the voters left that answer would\n" +
			"not be a majority of the voters left (the cluster would stop); --force removes it anyway.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				if err := refuseHealthyVoter(cmd.Context(), g, args[0]); err != nil {
					return err
				}
			}
			err := slow().leader(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
				_, err := c.RemoveNode(ctx, &dexv1.RemoveNodeRequest{NodeId: args[0], Force: force})
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s removed\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove even when the voters left that answer would not be a majority")
	cmd.Flags().BoolVar(&yes, "yes", false, "remove the node even though it is a voter that answers")
	return cmd
}

// refuseHealthyVoter refuses to remove a voter that answers: that is how a
// dead node is replaced, and a typo of its id would shrink a healthy
// cluster instead.
func refuseHealthyVoter(ctx context.Context, g *globals, id string) error {
	var st *dexv1.StatusResponse
	err := g.anyNode(ctx, func(ctx context.Context, c dexv1.AdminServiceClient) error {
		r, err := c.Status(ctx, &dexv1.StatusRequest{})
		st = r
		return err
	})
	if err != nil {
		return err
	}
	voters := 0
	var node *dexv1.NodeStatus
	for _, n := range st.Nodes {
		if n.Suffrage == "voter" {
			voters++
		}
		if n.Id == id {
			node = n
		}
	}
	if node == nil || node.Suffrage != "voter" || node.State == "unreachable" {
		return nil // the leader refuses a stranger; a non-voter or a dead voter goes without asking
	}
	left := voters - 1
	return fmt.Errorf("node %s is a voter that answers (%s): removing it leaves %s, which survive %s; give --yes to remove it",
		id, node.State, plural(left, "voter", "voters"), plural((left-1)/2, "failure", "failures"))
}
