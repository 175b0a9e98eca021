package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// --list-pages measures the sessions list as an operator reads it: pages of
// 50 through ListSessions over gRPC, with the idle load in the state. The
// idle sessions then carry an agent and labels, so the filters below match
// a known share of them.

// listPageSize is the page an operator reads (the console's).
const listPageSize = 50

// listShape labels idle session i: one of 10 agents, 20 teams, 3 envs.
func listShape(i int, req *dexv1.CreateSessionRequest) {
	req.Agent = listAgents()[i%10]
	req.Labels = []*dexv1.Label{
		{Key: "team", Value: fmt.Sprintf("team-%02d", i%20)},
		{Key: "env", Value: []string{"prod", "staging", "dev"}[i%3]},
	}
}

// listAgents are the idle sessions' agents, which Workers of their own run.
func listAgents() []string {
	out := make([]string, 10)
	for i := range out {
		out[i] = fmt.Sprintf("agent-%d", i)
	}
	return out
}

// listQuery is one filter of the list benchmark.
type listQuery struct {
	name string
	req  func(now time.Time) *dexv1.ListSessionsRequest
}

func labels(kv ...string) []*dexv1.Label {
	var out []*dexv1.Label
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &dexv1.Label{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

var (
	byCreated = dexv1.SessionOrder_SESSION_ORDER_CREATED
	byUpdated = dexv1.SessionOrder_SESSION_ORDER_UPDATED
)

// listQueries are the filters measured, from every session to none.
var listQueries = []listQuery{
	{"newest first", func(time.Time) *dexv1.ListSessionsRequest {
		return &dexv1.ListSessionsRequest{OrderBy: byCreated, Descending: true}
	}},
	{"updated, newest first", func(time.Time) *dexv1.ListSessionsRequest {
		return &dexv1.ListSessionsRequest{OrderBy: byUpdated, Descending: true}
	}},
	{"status idle", func(time.Time) *dexv1.ListSessionsRequest {
		return &dexv1.ListSessionsRequest{Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, OrderBy: byCreated, Descending: true}
	}},
	{"agent (1 in 10)", func(time.Time) *dexv1.ListSessionsRequest {
		return &dexv1.ListSessionsRequest{Agent: "agent-3", OrderBy: byUpdated, Descending: true}
	}},
	{"label (1 in 20)", func(time.Time) *dexv1.ListSessionsRequest {
		return &dexv1.ListSessionsRequest{Labels: labels("team", "team-07"), OrderBy: byCreated}
	}},
	{"two labels (1 in 60)", func(time.Time) *dexv1.ListSessionsRequest {
		return &dexv1.ListSessionsRequest{Labels: labels("team", "team-07", "env", "prod"), OrderBy: byCreated, Descending: true}
	}},
	{"label, created in the last minute", func(now time.Time) *dexv1.ListSessionsRequest {
		return &dexv1.ListSessionsRequest{Labels: labels("env", "dev"), CreatedAfterMs: now.Add(-time.Minute).UnixMilli(), OrderBy: byCreated, Descending: true}
	}},
	// Nothing matches: each page walks its bound of index entries and
	// comes back empty with a token, the slowest page there is.
	{"status errored (none)", func(time.Time) *dexv1.ListSessionsRequest {
		return &dexv1.ListSessionsRequest{Status: dexv1.SessionStatus_SESSION_STATUS_ERRORED, Labels: labels("team", "team-07"), OrderBy: byUpdated}
	}},
}

// listReport is the list benchmark: how long the cluster took to settle
// after the idle load, and each filter's pages.
type listReport struct {
	SettledSeconds float64 `json:"settled_seconds"`
	// The machine's busy share over the last second of the wait.
	BusyAtStart float64      `json:"machine_busy_at_start_pct"`
	Filters     []listResult `json:"filters"`
}

// listResult is what reading one filter's pages took.
type listResult struct {
	Filter string `json:"filter"`
	Pages  *dist  `json:"page_ms"`
	// Mean sessions per page, and those with their first message.
	SessionsPerPage      float64 `json:"sessions_per_page"`
	FirstMessagesPerPage float64 `json:"first_messages_per_page"`
	// The machine's busy share while this filter's pages were read, every
	// process counted (a snapshot of the state may run meanwhile).
	MachineBusy float64 `json:"machine_busy_pct"`
}

// listQuiet is the machine's busy share under which the list is measured:
// right after the idle load the nodes still collect the garbage of 100,000
// sessions' creation, the share a bulk load costs and not a list's.
const listQuiet = 0.5

// settle waits until the machine was less than listQuiet busy over a
// second, at most limit; it returns how long it waited and the last
// second's share.
func settle(ctx context.Context, limit time.Duration) (time.Duration, float64) {
	start := time.Now()
	for {
		m0 := machineCPU()
		select {
		case <-ctx.Done():
			return time.Since(start), 0
		case <-time.After(time.Second):
		}
		m1 := machineCPU()
		share := 0.0
		if m1.total > m0.total {
			share = (m1.busy - m0.busy) / (m1.total - m0.total)
		}
		if share < listQuiet || time.Since(start) >= limit {
			return time.Since(start), share
		}
	}
}

// measureList reads pages of every listQuery, each from its first page on
// and from the first page again when its list ends, one call at a time.
func measureList(ctx context.Context, svc dexv1.SessionServiceClient, pages int) ([]listResult, error) {
	var out []listResult
	for _, q := range listQueries {
		base := q.req(time.Now())
		base.PageSize = listPageSize
		token := ""
		durs := make([]float64, 0, pages)
		listed, firsts := 0, 0
		m0 := machineCPU()
		for range pages {
			req := proto.CloneOf(base)
			req.PageToken = token
			t := time.Now()
			resp, err := svc.ListSessions(ctx, req)
			durs = append(durs, ms(time.Since(t)))
			if err != nil {
				return out, fmt.Errorf("list %s: %w", q.name, err)
			}
			listed += len(resp.Sessions)
			for _, s := range resp.Sessions {
				if s.FirstMessage != "" {
					firsts++
				}
			}
			token = resp.NextPageToken
		}
		r := listResult{Filter: q.name, Pages: newDist(durs), SessionsPerPage: per(listed, pages), FirstMessagesPerPage: per(firsts, pages)}
		if m1 := machineCPU(); m1.total > m0.total {
			r.MachineBusy = math.Round((m1.busy-m0.busy)/(m1.total-m0.total)*1000) / 10
		}
		out = append(out, r)
	}
	return out, nil
}

func per(n, pages int) float64 { return math.Round(float64(n)/float64(pages)*10) / 10 }

// checkList refuses --list-pages without sessions to list.
func checkList(o options) error {
	if o.listPages < 0 {
		return errors.New("--list-pages must not be negative")
	}
	if o.listPages > 0 && o.idleSessions == 0 {
		return errors.New("--list-pages lists the idle load: give --idle-sessions too")
	}
	return nil
}

func printList(w io.Writer, l *listReport, sessions int) {
	if l == nil {
		return
	}
	fmt.Fprintf(w, "ListSessions, pages of %d with %d idle sessions in the state, one call at a time, from %.0f s after the load (machine busy %.1f %% over the second before):\n",
		listPageSize, sessions, l.SettledSeconds, l.BusyAtStart)
	for _, r := range l.Filters {
		fmt.Fprintf(w, "  %-34s p50 %5.1f  p99 %5.1f  max %5.1f ms over %d pages; %.1f sessions a page, %.1f with their first message; machine busy %.1f %%\n",
			r.Filter, r.Pages.P50, r.Pages.P99, r.Pages.Max, r.Pages.N, r.SessionsPerPage, r.FirstMessagesPerPage, r.MachineBusy)
	}
}
