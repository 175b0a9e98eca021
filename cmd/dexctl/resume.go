package main

import (
	"context"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// newResumeCmd is `resume` (and `session resume`): one paused or errored
// session, or with a filter every one it matches, as a bulk job.
func newResumeCmd(g *globals) *cobra.Command {
	var drop bool
	var bulk bulkFilter
	cmd := simpleCmd(g, "resume SESSION | resume --filter ...", "Resume a paused or errored session: it retries its kept turn once, or drops it (--drop); with a filter, every one it matches retries", 1,
		func(ctx context.Context, c dexv1.SessionServiceClient, a []string, tr grpc.CallOption) error {
			choice := dexv1.ResumeChoice_RESUME_CHOICE_RETRY
			if drop {
				choice = dexv1.ResumeChoice_RESUME_CHOICE_DROP
			}
			_, err := c.ResumeSession(ctx, &dexv1.ResumeSessionRequest{SessionId: a[0], Choice: choice}, tr)
			return err
		}, func(a []string) map[string]any {
			how := "retry"
			if drop {
				how = "drop"
			}
			return map[string]any{"session": a[0], "choice": how, "result": "resumed (" + how + ")"}
		})
	cmd.Args = cobra.MaximumNArgs(1)
	cmd.RunE = bulkOrOne(g, &bulk, dexv1.BulkAction_BULK_ACTION_RESUME, func(_ *dexv1.StartBulkActionRequest, args []string) ([]string, error) {
		if drop {
			// A bulk resume retries: the job has no choice to carry.
			return nil, usagef("--drop takes a session ID: a resume by filter retries each session's kept turn")
		}
		return args, nil
	}, cmd.RunE)
	cmd.Flags().BoolVar(&drop, "drop", false, "drop the kept turn (its tool results become error notes) and go on with the inbox, instead of retrying it")
	addBulkFilterFlags(cmd, &bulk)
	return cmd
}
