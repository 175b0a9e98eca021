package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func newSessionEditCmd(g *globals) *cobra.Command {
	var (
		asJSON   bool
		truncate uint64
		note     string
	)
	cmd := &cobra.Command{
		Use:   "edit ID",
		Short: "Splice an idle, errored or paused session's history (clears its rejected-turn count)",
		Long: "Drop the history entries from --truncate-from SEQ on (see `dexctl session show` for seqs), " +
			"add a --note the model reads, or both. The rejected-turn count starts again at 0; " +
			"a paused session stays paused until `dexctl resume`.",
		Args: cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			if truncate == 0 && note == "" {
				return usagef("nothing to edit: give --truncate-from SEQ, --note TEXT, or both")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var res *dexv1.EditHistoryResponse
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				var err error
				res, err = sessions(conn).EditHistory(ctx, &dexv1.EditHistoryRequest{SessionId: args[0], TruncateFromSeq: truncate, Note: note}, tr)
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{
					"id": args[0], "edited": true, "history_count": res.HistoryCount, "history_size": res.HistorySize,
				})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "edited %s: %s, %s\n", args[0], plural(res.HistoryCount, "history entry", "history entries"), plural(res.HistorySize, "character", "characters"))
			return nil
		},
	}
	cmd.Flags().Uint64Var(&truncate, "truncate-from", 0, "drop the history entries from this seq on")
	cmd.Flags().StringVar(&note, "note", "", "a note added at the end of the history, for the model")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
