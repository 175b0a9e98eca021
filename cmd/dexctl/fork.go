package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

func newSessionForkCmd(g *globals) *cobra.Command {
	var at uint64
	var msg, msgFile, id, agent string
	var labels []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fork ID --at SEQ [--message TEXT] [--label KEY=VALUE…]",
		Short: "Create a session whose history is a copy of another's up to an entry",
		Long: `Create a new session whose history is the history of session ID up to and
including entry SEQ (the seq "session show" prints). The recorded model
outputs and tool results are copied: nothing runs again. The fork has the
source's agent and labels unless --agent or --label give others (--label
replaces them all), and lives in the source's partition. With --message
the fork starts its first turn with it.

An entry of a turn that has not ended is refused, and so is an entry that
would cut a model output from its tool results (docs/forks.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("at") {
				return usagef("give --at SEQ: the entry of %s the fork's history ends with", safe(args[0]))
			}
			msg, err := messageText(cmd, msg, msgFile)
			if err != nil {
				return err
			}
			req := &dexv1.ForkSessionRequest{SourceSessionId: args[0], AtSeq: at, Message: msg, Agent: agent}
			if req.Labels, err = parseLabels("--label", labels); err != nil {
				return err
			}
			explicitID := id
			if id == "" {
				// Chosen here so a retry after a lost answer is recognised,
				// in the source's partition, where a fork lives.
				id = client.NewSessionID()
				if n := g.partitionCount(cmd.Context()); n > 1 {
					id = wirerules.NewSessionIDIn(wirerules.PartitionOf(args[0], n), n)
				}
			}
			req.SessionId = id
			tried := false
			var fork *dexv1.Session
			err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := sessions(conn).ForkSession(ctx, req, tr)
				if status.Code(err) == codes.AlreadyExists && tried && explicitID == "" {
					return nil // an earlier try committed before its answer was lost
				}
				tried = tried || err != nil
				fork = r.GetSession()
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"id": id, "forked_from": args[0], "forked_at_seq": at,
					"status": statusText(fork)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s  forked from %s at entry %d\n", safe(id), safe(args[0]), at)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&at, "at", 0, "the source's history entry (seq) the fork's history ends with")
	cmd.Flags().StringVar(&msg, "message", "", "the fork's first message, which starts its first turn (- reads it from standard input)")
	cmd.Flags().StringVar(&msgFile, "message-file", "", "read the first message from this file (- for standard input)")
	cmd.Flags().StringVar(&id, "id", "", "the fork's id (default: a new random one in the source's partition)")
	cmd.Flags().StringVar(&agent, "agent", "", "the fork's agent, NAME or NAME@VERSION (default: the source's)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "KEY=VALUE: a label of the fork, replacing the source's (repeatable; docs/labels.md)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// statusText is a session's status as dexctl names it ("" when the answer
// of a retried call carried none).
func statusText(s *dexv1.Session) string {
	if s == nil {
		return ""
	}
	return lowerName(s.Status.String(), "SESSION_STATUS_")
}
