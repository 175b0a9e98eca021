package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// maxListed caps how many sessions `session list` reads when it reads every
// page; beyond it, page with --page-size and --page-token.
const maxListed = 10000

// statusFilters are the statuses --status accepts.
var statusFilters = []string{"idle", "running", "waiting", "errored", "paused", "closed"}

// statusOf is the status a --status name stands for.
func statusOf(name string) dexv1.SessionStatus {
	for v := range dexv1.SessionStatus_name {
		if st := dexv1.SessionStatus(v); st != 0 && fsm.StatusName(fsmpb.SessionStatus(st)) == name {
			return st
		}
	}
	return 0
}

// listFilter is what session list asks the cluster to filter on.
type listFilter struct {
	labels        []string
	agent, parent string
	forkedFrom    string
	since, until  string
	order         string
}

// request fills the filter into req (now: what --since and --until count
// back from). It reports whether any filter or order was given.
func (f *listFilter) request(req *dexv1.ListSessionsRequest, status string, now time.Time) (bool, error) {
	labels, err := parseLabels("--label", f.labels)
	if err != nil {
		return false, err
	}
	req.Labels, req.Agent, req.ParentId, req.ForkedFrom = labels, f.agent, f.parent, f.forkedFrom
	if status != "" {
		req.Status = statusOf(status)
	}
	switch f.order {
	case "", "created":
		req.OrderBy = dexv1.SessionOrder_SESSION_ORDER_CREATED
	case "updated":
		req.OrderBy = dexv1.SessionOrder_SESSION_ORDER_UPDATED
	default:
		return false, usagef("--order %q: use created or updated", f.order)
	}
	from, err := pointInTime("--since", f.since, now)
	if err != nil {
		return false, err
	}
	to, err := pointInTime("--until", f.until, now)
	if err != nil {
		return false, err
	}
	if from != 0 && to != 0 && from > to {
		return false, usagef("--since is later than --until")
	}
	if req.OrderBy == dexv1.SessionOrder_SESSION_ORDER_UPDATED {
		req.UpdatedAfterMs, req.UpdatedBeforeMs = from, to
	} else {
		req.CreatedAfterMs, req.CreatedBeforeMs = from, to
	}
	any := len(labels) > 0 || f.agent != "" || f.parent != "" || f.forkedFrom != "" || status != "" || from != 0 || to != 0 || f.order != ""
	if any {
		req.Descending = true // newest first, as the table shows them
	} else {
		req.OrderBy = dexv1.SessionOrder_SESSION_ORDER_UNSPECIFIED
	}
	return any, nil
}

// pointInTime reads a duration back from now (1h) or an RFC 3339 time, as
// Unix ms (0 for none).
func pointInTime(flag, v string, now time.Time) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return 0, usagef("%s %q: a duration back from now is not negative", flag, v)
		}
		return now.Add(-d).UnixMilli(), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return 0, usagef("%s %q: give a duration back from now (1h, 30m) or an RFC 3339 time", flag, v)
	}
	return t.UnixMilli(), nil
}

type sessionRow struct {
	ID             string            `json:"id"`
	Parent         string            `json:"parent,omitempty"`
	Agent          string            `json:"agent,omitempty"`
	Status         string            `json:"status"`
	Labels         map[string]string `json:"labels,omitempty"`
	TurnsCompleted uint64            `json:"turns_completed"`
	CreatedAtMs    int64             `json:"created_at_ms"`
	UpdatedAtMs    int64             `json:"updated_at_ms"`
	// FirstMessage is the session's first message as the cluster lists it
	// (its first 200 bytes).
	FirstMessage string `json:"first_message,omitempty"`
}

func newSessionListCmd(g *globals) *cobra.Command {
	var asJSON bool
	var statusFilter, pageToken string
	var limit, pageSize int
	var filter listFilter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List sessions, newest first",
		Long: `List sessions, newest first.

By default every page is read (up to ` + fmt.Sprint(maxListed) + ` sessions). With --page-size or
--page-token only one page of the cluster's listing is read; the next
page's token is printed after the table, or as next_page_token in JSON.

--status, --label, --agent, --parent, --forked-from, --since, --until and --order are
filtered by the cluster through its indexes (docs/labels.md): --since and
--until bound the creation time, or with --order updated the last update.
Without any of them the cluster pages by session id and the table is sorted
here.

In a cluster of more than one partition the table ends with each session's
PARTITION (from the cluster's status; left out when no node gives it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if statusFilter != "" && !contains(statusFilters, statusFilter) {
				return usagef("--status %q: use one of %s", statusFilter, strings.Join(statusFilters, ", "))
			}
			if limit < 0 || pageSize < 0 {
				return usagef("--limit and --page-size must not be negative")
			}
			onePage := pageSize > 0 || pageToken != ""
			base := &dexv1.ListSessionsRequest{PageSize: uint32(pageSize)}
			filtered, err := filter.request(base, statusFilter, time.Now())
			if err != nil {
				return err
			}
			var all []*dexv1.SessionSummary
			var next string
			capped := false
			err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				all, next, capped = nil, "", false
				req := proto.CloneOf(base)
				req.PageToken = pageToken
				for {
					r, err := sessions(conn).ListSessions(ctx, req, tr)
					if err != nil {
						return err
					}
					all = append(all, r.Sessions...)
					next = r.NextPageToken
					if onePage || next == "" {
						return nil
					}
					if len(all) >= maxListed {
						capped = true
						return nil
					}
					req = proto.CloneOf(base)
					req.PageSize, req.PageToken = 0, next
				}
			})
			if err != nil {
				return err
			}
			rows := sessionRows(all, statusFilter, limit, filter.order == "updated")
			if asJSON {
				out := map[string]any{"sessions": rows}
				if onePage || capped {
					out["next_page_token"] = next
				}
				return printJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			printSessionRows(w, rows, g.partitionCount(cmd.Context()), time.Now())
			switch {
			case onePage && next != "":
				fmt.Fprintf(w, "\nnext page: --page-token %s\n", safe(next))
			case capped:
				order := "by id"
				if filtered {
					order = "newest first"
				}
				fmt.Fprintf(w, "\nread the first %s only (%s); read the rest with --page-token %s\n", plural(len(all), "session", "sessions"), order, safe(next))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&statusFilter, "status", "", "only sessions with this status: "+strings.Join(statusFilters, ", "))
	cmd.Flags().IntVar(&limit, "limit", 0, "show at most this many sessions, the newest (0: all)")
	cmd.Flags().IntVar(&pageSize, "page-size", 0, "read one page of this many sessions (0: read every page)")
	cmd.Flags().StringVar(&pageToken, "page-token", "", "read the page that starts here (from a previous list)")
	cmd.Flags().StringArrayVar(&filter.labels, "label", nil, "KEY=VALUE: only sessions with this label (repeatable: all of them)")
	cmd.Flags().StringVar(&filter.agent, "agent", "", "only sessions of this agent")
	cmd.Flags().StringVar(&filter.parent, "parent", "", "only the children of this session")
	cmd.Flags().StringVar(&filter.forkedFrom, "forked-from", "", "only the forks of this session (docs/forks.md)")
	cmd.Flags().StringVar(&filter.since, "since", "", "only sessions created (--order updated: updated) since: a duration back from now (1h) or an RFC 3339 time")
	cmd.Flags().StringVar(&filter.until, "until", "", "only sessions created (--order updated: updated) before: a duration back from now or an RFC 3339 time")
	cmd.Flags().StringVar(&filter.order, "order", "", "created or updated: newest first by this time (default: created)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// sessionRows filters by status, sorts newest first (by creation, or by
// last update when byUpdated; then by id) and keeps the first limit (0:
// all).
func sessionRows(all []*dexv1.SessionSummary, status string, limit int, byUpdated bool) []sessionRow {
	rows := []sessionRow{}
	for _, s := range all {
		name := fsm.StatusName(fsmpb.SessionStatus(s.Status))
		if status != "" && name != status {
			continue
		}
		rows = append(rows, sessionRow{s.Id, s.ParentId, s.Agent, name, labelsMap(s.Labels), s.TurnsCompleted, s.CreatedAtMs, s.UpdatedAtMs, s.FirstMessage})
	}
	at := func(r sessionRow) int64 {
		if byUpdated {
			return r.UpdatedAtMs
		}
		return r.CreatedAtMs
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if at(rows[i]) != at(rows[j]) {
			return at(rows[i]) > at(rows[j])
		}
		return rows[i].ID < rows[j].ID
	})
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows
}

// printSessionRows prints the sessions as a table. In a cluster of more
// than one partition, a column names each session's; the last shows the
// start of each session's first message.
func printSessionRows(w interface{ Write([]byte) (int, error) }, rows []sessionRow, partitions int, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	header := "ID\tSTATUS\tCREATED\tUPDATED\tTURNS\tPARENT\tAGENT"
	labelled := slices.ContainsFunc(rows, func(r sessionRow) bool { return len(r.Labels) > 0 })
	if labelled {
		header += "\tLABELS"
	}
	if partitions > 1 {
		header += "\tPARTITION"
	}
	header += "\tMESSAGE"
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		parent, agent := r.Parent, r.Agent
		if parent == "" {
			parent = "-"
		}
		if agent == "" {
			agent = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s", safe(r.ID), r.Status, timeText(r.CreatedAtMs), ago(now, r.UpdatedAtMs), r.TurnsCompleted, safe(parent), safe(agent))
		if labelled {
			fmt.Fprintf(tw, "\t%s", labelsLine(r.Labels))
		}
		if partitions > 1 {
			fmt.Fprintf(tw, "\t%d", wirerules.PartitionOf(r.ID, partitions))
		}
		fmt.Fprintf(tw, "\t%s\n", messageColumn(r.FirstMessage))
	}
	tw.Flush()
}

// timeText writes a cluster time (ms since the epoch) as RFC 3339 in UTC.
func timeText(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// ago writes how long before now ms was, to the second ("3m12s ago").
func ago(now time.Time, ms int64) string {
	if ms == 0 {
		return "-"
	}
	d := now.Sub(time.UnixMilli(ms)).Round(time.Second)
	if d < 0 {
		return "just now"
	}
	return d.String() + " ago"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// messageColumnRunes is how much of a first message the table shows.
const messageColumnRunes = 40

// messageColumn is the start of a first message on one line: at most
// messageColumnRunes characters, "…" where it was cut, "-" when none.
func messageColumn(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if text == "" {
		return "-"
	}
	if r := []rune(text); len(r) > messageColumnRunes {
		text = string(r[:messageColumnRunes-1]) + "…"
	}
	return safe(text)
}
