package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func newSessionCloseCmd(g *globals) *cobra.Command {
	var asJSON bool
	var bulk bulkFilter
	cmd := &cobra.Command{
		Use:   "close ID | close --filter ...",
		Short: "Close a session: it takes no more messages and can still be read; a turn in progress ends first",
		Args:  cobra.MaximumNArgs(1),
		RunE: bulkOrOne(g, &bulk, dexv1.BulkAction_BULK_ACTION_CLOSE, nil, func(cmd *cobra.Command, args []string) error {
			// A close of a closed session succeeds, so a retry after a
			// lost answer is safe.
			var s *dexv1.Session
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := sessions(conn).CloseSession(ctx, &dexv1.CloseSessionRequest{SessionId: args[0]}, tr)
				s = r.GetSession()
				return err
			})
			if err != nil {
				return err
			}
			closed := s.GetStatus() == dexv1.SessionStatus_SESSION_STATUS_CLOSED
			if asJSON {
				out := map[string]any{"id": args[0], "closed": closed, "closing": !closed}
				if closed {
					out["delete_at_ms"] = s.GetDeleteAtMs()
				}
				return printJSON(cmd.OutOrStdout(), out)
			}
			switch {
			case !closed:
				fmt.Fprintf(cmd.OutOrStdout(), "%s is closing: it takes no more messages and is closed when its turn ends\n", safe(args[0]))
			case s.GetDeleteAtMs() == 0:
				fmt.Fprintf(cmd.OutOrStdout(), "closed %s (kept for ever)\n", safe(args[0]))
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "closed %s (deleted after %s)\n", safe(args[0]), time.UnixMilli(s.GetDeleteAtMs()).UTC().Format(time.RFC3339))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addBulkFilterFlags(cmd, &bulk)
	return cmd
}
