package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

func newSessionBudgetCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "budget ID FIELD=N[,FIELD=N…]",
		Short: "Change a session's budget (max_tokens, max_cost_micros, max_turns, max_model_calls_per_turn, max_tool_calls_per_turn, loop_limit; 0: no limit)",
		Long: `Change the given fields of a session's budget; the others keep their
values, and 0 is no limit. A session paused by its budget stays paused:
resume it (dexctl resume ID) to go on.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ch, err := wirerules.ParseBudget(args[1])
			if err != nil {
				return usagef("%v", err)
			}
			var s *dexv1.Session
			err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := sessions(conn).SetBudget(ctx, &dexv1.SetBudgetRequest{SessionId: args[0], Change: ch}, tr)
				s = r.GetSession()
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "budget": toBudgetJSON(s.GetBudget())})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s budget: %s\n", safe(args[0]), budgetLine(toBudgetJSON(s.GetBudget())))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// budgetLine is a budget as wirerules.BudgetText writes it.
func budgetLine(b budgetJSON) string {
	return wirerules.BudgetText(&dexv1.Budget{MaxTokens: b.MaxTokens, MaxCostMicros: b.MaxCostMicros, MaxTurns: b.MaxTurns,
		MaxModelCallsPerTurn: b.MaxModelCallsPerTurn, MaxToolCallsPerTurn: b.MaxToolCallsPerTurn, LoopLimit: b.LoopLimit})
}

// printUsage prints what a session used and its budget.
func printUsage(w io.Writer, s sessionJSON) {
	u, t := s.Usage, s.TreeUsage
	fmt.Fprintf(w, "usage: %d model calls, %d tool calls, %d input + %d output tokens, cost %d micro-units",
		u.ModelCalls, u.ToolCalls, u.InputTokens, u.OutputTokens, u.CostMicros)
	if t != u {
		fmt.Fprintf(w, " (with its children: %d tokens, cost %d)", t.InputTokens+t.OutputTokens, t.CostMicros)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "budget: %s\n", budgetLine(s.Budget))
}
