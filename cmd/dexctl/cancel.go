package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func newSessionCancelCmd(g *globals) *cobra.Command {
	var by, reason string
	var asJSON bool
	var bulk bulkFilter
	cmd := &cobra.Command{
		Use:   "cancel ID | cancel --filter ...",
		Short: "Stop a session's turn: queued Steps dropped, running attempts cancelled, waits ended; the session goes idle and its model is told",
		Args:  cobra.MaximumNArgs(1),
		RunE: bulkOrOne(g, &bulk, dexv1.BulkAction_BULK_ACTION_CANCEL, func(req *dexv1.StartBulkActionRequest, args []string) ([]string, error) {
			req.Reason = reason
			return args, nil
		}, func(cmd *cobra.Command, args []string) error {
			// Only a try that timed out may have committed: then "no turn"
			// on the next try is that cancel's doing.
			timedOut, lost := false, false
			var resp *dexv1.CancelSessionResponse
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := sessions(conn).CancelSession(ctx, &dexv1.CancelSessionRequest{SessionId: args[0], By: by, Reason: reason}, tr)
				if timedOut && status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "no turn") {
					lost = true
					return nil
				}
				timedOut = timedOut || status.Code(err) == codes.DeadlineExceeded
				resp = r
				return err
			})
			if err != nil {
				return err
			}
			if lost {
				resp = &dexv1.CancelSessionResponse{}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "cancelled": true,
					"steps_cancelled": resp.StepsCancelled, "attempts_cancelled": resp.AttemptsCancelled})
			}
			if lost {
				fmt.Fprintf(cmd.OutOrStdout(), "cancelled the turn of %s (the answer was lost; see session show)\n", args[0])
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancelled the turn of %s: %s ended, %s cancelled at their Workers; the session is idle\n",
				args[0], plural(resp.StepsCancelled, "Step", "Steps"), plural(resp.AttemptsCancelled, "running attempt", "running attempts"))
			return nil
		}),
	}
	cmd.Flags().StringVar(&by, "by", "", `who cancels, as the model is told: "The previous turn was cancelled by BY" (default "an operator")`)
	cmd.Flags().StringVar(&reason, "reason", "", "why, added to the note the model reads")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addBulkFilterFlags(cmd, &bulk)
	return cmd
}
