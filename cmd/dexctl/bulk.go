package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Bulk actions (docs/bulk.md): `session cancel|close|delete|resume|label`
// (and `resume`) with a filter instead of an id, `bulk start ACTION` for every action, and `bulk list|
// show|cancel` for the jobs.

// bulkFilter is the filter flags of a bulk action: those of session list,
// or the same given as one --filter 'label=k=v,agent=A,status=S,since=1h'.
type bulkFilter struct {
	listFilter
	status string
	spec   string
	all    bool
	noWait bool
}

func addBulkFilterFlags(cmd *cobra.Command, f *bulkFilter) {
	cmd.Flags().StringVar(&f.spec, "filter", "", "the sessions to act on, as KEY=VALUE,...: label=k=v (repeatable), agent, status, parent, forked-from, since, until")
	cmd.Flags().StringArrayVar(&f.labels, "label", nil, "KEY=VALUE: act on sessions with this label (repeatable: all of them)")
	cmd.Flags().StringVar(&f.agent, "agent", "", "act on sessions of this agent")
	cmd.Flags().StringVar(&f.status, "status", "", "act on sessions in this status: "+strings.Join(statusFilters, ", "))
	cmd.Flags().StringVar(&f.parent, "parent", "", "act on the children of this session")
	cmd.Flags().StringVar(&f.forkedFrom, "forked-from", "", "act on the forks of this session")
	cmd.Flags().StringVar(&f.since, "since", "", "act on sessions created since: a duration back from now (1h) or an RFC 3339 time")
	cmd.Flags().StringVar(&f.until, "until", "", "act on sessions created before: a duration back from now or an RFC 3339 time")
	cmd.Flags().BoolVar(&f.all, "all", false, "with no filter, act on every session (needed for a delete)")
	cmd.Flags().BoolVar(&f.noWait, "no-wait", false, "print the job and return at once instead of following it until it ends")
}

// given reports whether any filter flag (or --all) was given: the command
// then acts in bulk rather than on one session.
func (f *bulkFilter) given() bool {
	return f.spec != "" || len(f.labels) > 0 || f.agent != "" || f.status != "" || f.parent != "" || f.forkedFrom != "" ||
		f.since != "" || f.until != "" || f.all
}

// parseSpec adds --filter's parts to the flags.
func (f *bulkFilter) parseSpec() error {
	if f.spec == "" {
		return nil
	}
	for _, part := range strings.Split(f.spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || v == "" {
			return usagef("--filter %q: each part is KEY=VALUE", part)
		}
		set := func(dst *string) error {
			if *dst != "" {
				return usagef("--filter: %s is given twice", k)
			}
			*dst = v
			return nil
		}
		var err error
		switch k {
		case "label":
			f.labels = append(f.labels, v)
		case "agent":
			err = set(&f.agent)
		case "status":
			err = set(&f.status)
		case "parent":
			err = set(&f.parent)
		case "forked-from", "forked_from":
			err = set(&f.forkedFrom)
		case "since":
			err = set(&f.since)
		case "until":
			err = set(&f.until)
		default:
			return usagef("--filter %q: %s is not one of label, agent, status, parent, forked-from, since, until", part, k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// filter is the API filter the flags give.
func (f *bulkFilter) filter(now time.Time) (*dexv1.BulkFilter, error) {
	if err := f.parseSpec(); err != nil {
		return nil, err
	}
	if f.status != "" && !contains(statusFilters, f.status) {
		return nil, usagef("--status %q: use one of %s", f.status, strings.Join(statusFilters, ", "))
	}
	var req dexv1.ListSessionsRequest
	if _, err := f.request(&req, f.status, now); err != nil {
		return nil, err
	}
	return &dexv1.BulkFilter{
		Status: req.Status, Agent: req.Agent, ParentId: req.ParentId, ForkedFrom: req.ForkedFrom, Labels: req.Labels,
		CreatedFromMs: req.CreatedAfterMs, CreatedToMs: req.CreatedBeforeMs,
	}, nil
}

// bulkActions are the actions by the name dexctl gives them.
var bulkActions = map[string]dexv1.BulkAction{
	"cancel": dexv1.BulkAction_BULK_ACTION_CANCEL, "resume": dexv1.BulkAction_BULK_ACTION_RESUME,
	"close": dexv1.BulkAction_BULK_ACTION_CLOSE, "delete": dexv1.BulkAction_BULK_ACTION_DELETE,
	"label": dexv1.BulkAction_BULK_ACTION_LABEL,
}

// startBulk starts a job, prints it, and unless --no-wait follows it until
// it ends (a cancelled job is an error).
func startBulk(cmd *cobra.Command, g *globals, f *bulkFilter, req *dexv1.StartBulkActionRequest) error {
	filter, err := f.filter(time.Now())
	if err != nil {
		return err
	}
	if req.Action == dexv1.BulkAction_BULK_ACTION_DELETE && fsm.EmptyBulkFilter(fsmpb.BulkFilterFromAPI(filter)) && !f.all {
		return usagef("a delete with no filter would delete every session: give a filter, or --all")
	}
	req.Filter, req.All = filter, f.all
	req.JobId = "bulk-" + client.NewIdempotencyKey() // one id for every try: a retry finds the job it started
	var job *dexv1.BulkJob
	err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
		r, err := sessions(conn).StartBulkAction(ctx, req, tr)
		if err != nil {
			if got, gerr := sessions(conn).GetBulkJob(ctx, &dexv1.GetBulkJobRequest{JobId: req.JobId}); gerr == nil {
				job = got.Job
				return nil
			}
			return err
		}
		job = r.Job
		return nil
	})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "bulk job %s started: %s\n", job.Id, describeBulk(job))
	if f.noWait {
		return nil
	}
	return followBulk(cmd, g, job.Id, out)
}

// followBulk prints a job's progress until it ends.
func followBulk(cmd *cobra.Command, g *globals, id string, out io.Writer) error {
	last := ""
	for {
		job, err := getBulk(cmd.Context(), g, id)
		if err != nil {
			return err
		}
		if line := progressLine(job); line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		switch job.Status {
		case dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE:
			return nil
		case dexv1.BulkJobStatus_BULK_JOB_STATUS_CANCELLED:
			return fmt.Errorf("bulk job %s was cancelled", id)
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func getBulk(ctx context.Context, g *globals, id string) (*dexv1.BulkJob, error) {
	var job *dexv1.BulkJob
	err := g.onLeader(ctx, func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
		r, err := sessions(conn).GetBulkJob(ctx, &dexv1.GetBulkJobRequest{JobId: id}, tr)
		if err == nil {
			job = r.Job
		}
		return err
	})
	return job, err
}

func statusWord(s dexv1.BulkJobStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "BULK_JOB_STATUS_"))
}

// progressLine is a job's counts on one line.
func progressLine(j *dexv1.BulkJob) string {
	var skips []string
	for _, s := range j.Skipped {
		skips = append(skips, fmt.Sprintf("%d %s", s.Count, s.Reason))
	}
	line := fmt.Sprintf("%s: %d acted on, %d skipped, %d failed", statusWord(j.Status), j.Acted, skippedCount(j), j.Failed)
	if len(skips) > 0 {
		line += " (skipped: " + strings.Join(skips, "; ") + ")"
	}
	return line
}

func skippedCount(j *dexv1.BulkJob) uint64 {
	var n uint64
	for _, s := range j.Skipped {
		n += s.Count
	}
	return n
}

// describeBulk is a job's action and filter in words.
func describeBulk(j *dexv1.BulkJob) string {
	what := fsm.BulkActionName(fsmpb.BulkAction(j.Action))
	f := j.Filter
	var parts []string
	for _, l := range f.GetLabels() {
		parts = append(parts, "label "+l.Key+"="+l.Value)
	}
	if f.GetAgent() != "" {
		parts = append(parts, "agent "+f.GetAgent())
	}
	if f.GetStatus() != 0 {
		parts = append(parts, "status "+fsm.StatusName(fsmpb.SessionStatus(f.GetStatus())))
	}
	if f.GetParentId() != "" {
		parts = append(parts, "parent "+f.GetParentId())
	}
	if f.GetForkedFrom() != "" {
		parts = append(parts, "forks of "+f.GetForkedFrom())
	}
	if f.GetCreatedFromMs() != 0 {
		parts = append(parts, "created since "+time.UnixMilli(f.GetCreatedFromMs()).UTC().Format(time.RFC3339))
	}
	if f.GetCreatedToMs() != 0 {
		parts = append(parts, "created before "+time.UnixMilli(f.GetCreatedToMs()).UTC().Format(time.RFC3339))
	}
	if len(parts) == 0 {
		parts = append(parts, "every session")
	}
	return what + " " + strings.Join(parts, ", ")
}

func newBulkCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bulk",
		Short: "Act on every session a filter matches, as a job the cluster carries out (docs/bulk.md)",
	}
	cmd.AddCommand(newBulkStartCmd(g), newBulkListCmd(g), newBulkShowCmd(g), newBulkCancelCmd(g))
	return cmd
}

func newBulkStartCmd(g *globals) *cobra.Command {
	var f bulkFilter
	var set []string
	var reason string
	cmd := &cobra.Command{
		Use:   "start cancel|resume|close|delete|label",
		Short: "Start a bulk job on the sessions the filter matches (created up to now), and follow it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			action, ok := bulkActions[args[0]]
			if !ok {
				return usagef("action %q: use cancel, resume, close, delete or label", args[0])
			}
			labels, err := parseLabels("--set", set)
			if err != nil {
				return err
			}
			if action == dexv1.BulkAction_BULK_ACTION_LABEL && len(labels) == 0 {
				return usagef("a label job needs --set KEY=VALUE")
			}
			return startBulk(cmd, g, &f, &dexv1.StartBulkActionRequest{Action: action, Labels: labels, Reason: reason})
		},
	}
	addBulkFilterFlags(cmd, &f)
	cmd.Flags().StringArrayVar(&set, "set", nil, "KEY=VALUE: the label a label job sets (repeatable)")
	cmd.Flags().StringVar(&reason, "reason", "", "a cancel's reason, added to the note each session's model reads")
	return cmd
}

func newBulkListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the bulk jobs the cluster keeps, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var jobs []*dexv1.BulkJob
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := sessions(conn).ListBulkJobs(ctx, &dexv1.ListBulkJobsRequest{}, tr)
				jobs = r.GetJobs()
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), jobs)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tACTED\tSKIPPED\tFAILED\tCREATED\tWHAT")
			for _, j := range jobs {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", j.Id, statusWord(j.Status), j.Acted, skippedCount(j), j.Failed,
					time.UnixMilli(j.CreatedAtMs).UTC().Format(time.RFC3339), describeBulk(j))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newBulkShowCmd(g *globals) *cobra.Command {
	var asJSON, follow bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a bulk job and its progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if follow {
				return followBulk(cmd, g, args[0], cmd.OutOrStdout())
			}
			job, err := getBulk(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), job)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bulk job %s: %s\n%s\n", job.Id, describeBulk(job), progressLine(job))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&follow, "follow", false, "print the progress until the job ends")
	return cmd
}

func newBulkCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a running bulk job: sessions already acted on stay so, no further one is",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var job *dexv1.BulkJob
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := sessions(conn).CancelBulkJob(ctx, &dexv1.CancelBulkJobRequest{JobId: args[0]}, tr)
				job = r.GetJob()
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bulk job %s %s\n", job.Id, progressLine(job))
			return nil
		},
	}
}

// bulkOrOne runs a session command on one session (its ID argument) or, with
// a filter, as a bulk job of action. fill, when not nil, completes the job's
// request from the command's flags and takes the arguments that are the
// job's, returning the others: an argument left with a filter is a session
// ID, refused.
func bulkOrOne(g *globals, f *bulkFilter, action dexv1.BulkAction, fill func(req *dexv1.StartBulkActionRequest, args []string) ([]string, error), one func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if f.given() {
			req := &dexv1.StartBulkActionRequest{Action: action}
			if fill != nil {
				var err error
				if args, err = fill(req, args); err != nil {
					return err
				}
			}
			if len(args) > 0 {
				return usagef("give a session ID or a filter, not both")
			}
			return startBulk(cmd, g, f, req)
		}
		if len(args) == 0 {
			return usagef("give a session ID, or a filter (--filter, --label, --agent, --status, --since, ...) to act on every session it matches")
		}
		return one(cmd, args)
	}
}
