package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// maxListed caps how many sessions `session list` reads when it reads every
// page; beyond it, page with --page-size and --page-token.
const maxListed = 10000

// statusFilters are the statuses --status accepts.
var statusFilters = []string{"idle", "running", "waiting", "errored", "paused"}

type sessionRow struct {
	ID             string `json:"id"`
	Parent         string `json:"parent,omitempty"`
	Agent          string `json:"agent,omitempty"`
	Status         string `json:"status"`
	TurnsCompleted uint64 `json:"turns_completed"`
	CreatedAtMs    int64  `json:"created_at_ms"`
	UpdatedAtMs    int64  `json:"updated_at_ms"`
}

func newSessionListCmd(g *globals) *cobra.Command {
	var asJSON bool
	var statusFilter, pageToken string
	var limit, pageSize int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List sessions, newest first",
		Long: `List sessions, newest first.

By default every page is read (up to ` + fmt.Sprint(maxListed) + ` sessions). With --page-size or
--page-token only one page of the cluster's listing is read (the cluster
pages by session id); the next page's token is printed after the table, or
as next_page_token in JSON.

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
			var all []*dexv1.SessionSummary
			var next string
			capped := false
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				all, next, capped = nil, "", false
				req := &dexv1.ListSessionsRequest{PageToken: pageToken, PageSize: uint32(pageSize)}
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
					req = &dexv1.ListSessionsRequest{PageToken: next}
				}
			})
			if err != nil {
				return err
			}
			rows := sessionRows(all, statusFilter, limit)
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
				fmt.Fprintf(w, "\nread the first %s only (by id); read the rest with --page-token %s\n", plural(len(all), "session", "sessions"), safe(next))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&statusFilter, "status", "", "only sessions with this status: "+strings.Join(statusFilters, ", "))
	cmd.Flags().IntVar(&limit, "limit", 0, "show at most this many sessions, the newest (0: all)")
	cmd.Flags().IntVar(&pageSize, "page-size", 0, "read one page of this many sessions (0: read every page)")
	cmd.Flags().StringVar(&pageToken, "page-token", "", "read the page that starts here (from a previous list)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// sessionRows filters by status, sorts newest first (then by id) and keeps
// the first limit (0: all).
func sessionRows(all []*dexv1.SessionSummary, status string, limit int) []sessionRow {
	rows := []sessionRow{}
	for _, s := range all {
		name := fsm.StatusName(fsmpb.SessionStatus(s.Status))
		if status != "" && name != status {
			continue
		}
		rows = append(rows, sessionRow{s.Id, s.ParentId, s.Agent, name, s.TurnsCompleted, s.CreatedAtMs, s.UpdatedAtMs})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].CreatedAtMs != rows[j].CreatedAtMs {
			return rows[i].CreatedAtMs > rows[j].CreatedAtMs
		}
		return rows[i].ID < rows[j].ID
	})
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows
}

// printSessionRows prints the sessions as a table. In a cluster of more
// than one partition, a last column names each session's.
func printSessionRows(w interface{ Write([]byte) (int, error) }, rows []sessionRow, partitions int, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	header := "ID\tSTATUS\tCREATED\tUPDATED\tTURNS\tPARENT\tAGENT"
	if partitions > 1 {
		header += "\tPARTITION"
	}
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
		if partitions > 1 {
			fmt.Fprintf(tw, "\t%d", wirerules.PartitionOf(r.ID, partitions))
		}
		fmt.Fprintln(tw)
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
