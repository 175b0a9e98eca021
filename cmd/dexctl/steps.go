package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// simpleCmd builds a command that makes one client call and prints a result.
func simpleCmd(g *globals, use, short string, nargs int, call func(ctx context.Context, c dexv1.SessionServiceClient, args []string, tr grpc.CallOption) error, done func(args []string) map[string]any) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(nargs),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				return call(ctx, sessions(conn), args, tr)
			})
			if err != nil {
				return err
			}
			out := done(args)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintln(cmd.OutOrStdout(), out["result"])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newStepCmds(g *globals) []*cobra.Command {
	var approveReason, denyReason, note, outcome string
	approve := simpleCmd(g, "approve STEP", "Approve a tool call that waits for approval", 1,
		func(ctx context.Context, c dexv1.SessionServiceClient, a []string, tr grpc.CallOption) error {
			_, err := c.ResolveApproval(ctx, &dexv1.ResolveApprovalRequest{StepId: a[0], Approved: true, Reason: approveReason}, tr)
			return err
		}, func(a []string) map[string]any { return map[string]any{"step": a[0], "result": "approved"} })
	approve.Flags().StringVar(&approveReason, "reason", "", "why")
	deny := simpleCmd(g, "deny STEP", "Deny a tool call that waits for approval", 1,
		func(ctx context.Context, c dexv1.SessionServiceClient, a []string, tr grpc.CallOption) error {
			_, err := c.ResolveApproval(ctx, &dexv1.ResolveApprovalRequest{StepId: a[0], Approved: false, Reason: denyReason}, tr)
			return err
		}, func(a []string) map[string]any { return map[string]any{"step": a[0], "result": "denied"} })
	deny.Flags().StringVar(&denyReason, "reason", "", "why (the model is told)")
	answer := simpleCmd(g, "answer STEP TEXT", "Answer the question a session asked", 2,
		func(ctx context.Context, c dexv1.SessionServiceClient, a []string, tr grpc.CallOption) error {
			_, err := c.AnswerQuestion(ctx, &dexv1.AnswerQuestionRequest{StepId: a[0], Answer: a[1]}, tr)
			return err
		}, func(a []string) map[string]any { return map[string]any{"step": a[0], "result": "answered"} })
	resume := newResumeCmd(g)
	reconcile := simpleCmd(g, "reconcile STEP", "Record what really happened to an outcome_unknown call", 1,
		func(ctx context.Context, c dexv1.SessionServiceClient, a []string, tr grpc.CallOption) error {
			o, err := parseOutcome(outcome)
			if err != nil {
				return err
			}
			_, err = c.ReconcileOutcome(ctx, &dexv1.ReconcileOutcomeRequest{StepId: a[0], Outcome: o, Note: note}, tr)
			return err
		}, func(a []string) map[string]any {
			return map[string]any{"step": a[0], "result": "reconciled: " + outcome, "outcome": outcome}
		})
	reconcile.Flags().StringVar(&outcome, "outcome", "", "succeeded or failed")
	reconcile.Flags().StringVar(&note, "note", "", "what the operator found (goes into the history)")
	_ = reconcile.MarkFlagRequired("outcome")
	reconcile.PreRunE = func(*cobra.Command, []string) error { _, err := parseOutcome(outcome); return err }
	return []*cobra.Command{approve, deny, answer, resume, reconcile}
}

func parseOutcome(s string) (dexv1.Outcome, error) {
	switch s {
	case "succeeded":
		return dexv1.Outcome_OUTCOME_SUCCEEDED, nil
	case "failed":
		return dexv1.Outcome_OUTCOME_FAILED, nil
	}
	return 0, usagef("--outcome must be succeeded or failed, not %q", s)
}
