package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func newSessionDeleteCmd(g *globals) *cobra.Command {
	var asJSON bool
	var bulk bulkFilter
	cmd := &cobra.Command{
		Use:   "delete ID | delete --filter ...",
		Short: "Delete an idle, paused or errored session with its Steps, history and events",
		Args:  cobra.MaximumNArgs(1),
		RunE: bulkOrOne(g, &bulk, dexv1.BulkAction_BULK_ACTION_DELETE, nil, func(cmd *cobra.Command, args []string) error {
			// Only a try that timed out may have committed; a follower's
			// redirect did not, so NotFound after it is the truth.
			timedOut := false
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				_, err := sessions(conn).DeleteSession(ctx, &dexv1.DeleteSessionRequest{SessionId: args[0]}, tr)
				if status.Code(err) == codes.NotFound && timedOut {
					return nil // the try that timed out committed before its answer was lost
				}
				timedOut = timedOut || status.Code(err) == codes.DeadlineExceeded
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "deleted": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addBulkFilterFlags(cmd, &bulk)
	return cmd
}
