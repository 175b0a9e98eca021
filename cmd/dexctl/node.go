package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

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
	cmd.AddCommand(&cobra.Command{
		Use:   "transfer-leadership [ID]",
		Short: "Hand leadership to node ID (any voter when omitted)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &dexv1.TransferLeadershipRequest{}
			if len(args) == 1 {
				req.NodeId = args[0]
			}
			var resp *dexv1.TransferLeadershipResponse
			err := slow().leader(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
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
	}, removeCmd(slow))
	return cmd
}

func removeCmd(slow func() *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove node ID from the cluster",
		Long: "Remove node ID from the cluster. Refused when the voters left that answer would not be\n" +
			"a majority of the voters left (the cluster would stop); --force removes it anyway.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
	return cmd
}
