package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

func apiLabels(kv ...string) []*dexv1.Label {
	var out []*dexv1.Label
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &dexv1.Label{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func labelString(ls []*dexv1.Label) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.Key+"="+l.Value)
	}
	return strings.Join(parts, ",")
}

func summaryIDs(ss []*dexv1.SessionSummary) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Id)
	}
	return out
}

func TestLabelsAndFilteredListThroughTheAPI(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range []*dexv1.CreateSessionRequest{
		{SessionId: "a", Agent: "coder", Labels: apiLabels("team", "red", "env", "prod")},
		{SessionId: "b", Agent: "writer", Labels: apiLabels("team", "red")},
		{SessionId: "c", Agent: "coder", ParentId: "a"},
	} {
		if _, err := c.CreateSession(ctx, r); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // distinct creation times
	}
	got, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "a"})
	if err != nil || labelString(got.Session.Labels) != "env=prod,team=red" {
		t.Fatalf("GetSession labels %v, %v", got.GetSession().GetLabels(), err)
	}
	set, err := c.SetLabels(ctx, &dexv1.SetLabelsRequest{SessionId: "b", Set: apiLabels("team", "blue", "tier", "1")})
	if err != nil || labelString(set.Session.Labels) != "team=blue,tier=1" {
		t.Fatalf("SetLabels answered %v, %v", set.GetSession().GetLabels(), err)
	}
	for _, q := range []struct {
		name string
		req  *dexv1.ListSessionsRequest
		want []string
	}{
		{"label", &dexv1.ListSessionsRequest{Labels: apiLabels("team", "red")}, []string{"a"}},
		{"agent", &dexv1.ListSessionsRequest{Agent: "coder"}, []string{"a", "c"}},
		{"agent newest first", &dexv1.ListSessionsRequest{Agent: "coder", Descending: true}, []string{"c", "a"}},
		{"parent", &dexv1.ListSessionsRequest{ParentId: "a"}, []string{"c"}},
		{"status", &dexv1.ListSessionsRequest{Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, OrderBy: dexv1.SessionOrder_SESSION_ORDER_UPDATED}, []string{"a", "c", "b"}},
		{"no match", &dexv1.ListSessionsRequest{Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING}, nil},
	} {
		var ids []string
		req := q.req
		req.PageSize = 1
		for range 10 {
			page, err := c.ListSessions(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", q.name, err)
			}
			ids = append(ids, summaryIDs(page.Sessions)...)
			if page.NextPageToken == "" {
				break
			}
			req.PageToken = page.NextPageToken
		}
		if !slices.Equal(ids, q.want) {
			t.Errorf("%s: got %v, want %v", q.name, ids, q.want)
		}
	}
	all, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{Labels: apiLabels("team", "blue")})
	if err != nil || len(all.Sessions) != 1 || labelString(all.Sessions[0].Labels) != "team=blue,tier=1" {
		t.Fatalf("a summary's labels: %v, %v", all, err)
	}
}

func TestLabelsAndListBadInputIsInvalidArgument(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s", Labels: apiLabels("team", "red")}); err != nil {
		t.Fatal(err)
	}
	invalid := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v; want InvalidArgument", what, err)
		}
	}
	_, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "t", Labels: apiLabels("Bad Key", "v")})
	invalid("create with a bad label", err)
	if _, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "t"}); status.Code(err) != codes.NotFound {
		t.Errorf("a refused create made the session: %v", err)
	}
	_, err = c.SetLabels(ctx, &dexv1.SetLabelsRequest{SessionId: "s", Set: apiLabels("k", strings.Repeat("v", 257))})
	invalid("a value too long", err)
	_, err = c.SetLabels(ctx, &dexv1.SetLabelsRequest{SessionId: "s", Remove: []string{"NO"}})
	invalid("a bad key removed", err)
	_, err = c.SetLabels(ctx, &dexv1.SetLabelsRequest{SessionId: "s"})
	invalid("no change", err)
	if _, err := c.SetLabels(ctx, &dexv1.SetLabelsRequest{SessionId: "nobody", Set: apiLabels("k", "v")}); status.Code(err) != codes.NotFound {
		t.Errorf("labels of an unknown session: %v", err)
	}
	if got, _ := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "s"}); labelString(got.GetSession().GetLabels()) != "team=red" {
		t.Fatalf("refused changes changed the labels: %v", got.GetSession().GetLabels())
	}
	otherOrder := listToken(&store.ListPosition{At: 1, ID: "s"}, store.ListByUpdated, false)
	for name, req := range map[string]*dexv1.ListSessionsRequest{
		"unknown status":    {Status: 99},
		"deleted status":    {Status: dexv1.SessionStatus_SESSION_STATUS_DELETED},
		"unknown order":     {OrderBy: 7},
		"malformed token":   {OrderBy: dexv1.SessionOrder_SESSION_ORDER_CREATED, PageToken: "!!not base64"},
		"garbled token":     {OrderBy: dexv1.SessionOrder_SESSION_ORDER_CREATED, PageToken: "bm9wZQ"},
		"another order's":   {OrderBy: dexv1.SessionOrder_SESSION_ORDER_CREATED, PageToken: otherOrder},
		"created from > to": {CreatedAfterMs: 20, CreatedBeforeMs: 10},
		"updated from > to": {UpdatedAfterMs: 20, UpdatedBeforeMs: 10},
		"negative time":     {CreatedAfterMs: -1},
		"bad label key":     {Labels: apiLabels("A", "v")},
		"label key twice":   {Labels: apiLabels("a", "1", "a", "2")},
	} {
		_, err := c.ListSessions(ctx, req)
		invalid(name, err)
	}
}

// Partitions each answer the same request; their merged pages, read to
// the end, are the one store's answer in order, with no duplicate or gap,
// also when a partition's page stops at its scan bound.
func TestMergeSessionPages_PartitionsPageAsOne(t *testing.T) {
	const parts = 3
	dbs := make([]*store.DB, parts)
	whole := store.New(store.Routing{})
	for k := range dbs {
		dbs[k] = store.New(store.Routing{})
	}
	n := parts*store.MaxListScan + 300
	wholeTx := whole.Txn(true)
	txs := make([]*store.Txn, parts)
	for k := range txs {
		txs[k] = dbs[k].Txn(true)
	}
	for i := range n {
		s := &fsmpb.Session{Id: fmt.Sprintf("s%05d", i), CreatedAtMs: int64(1 + i/4), UpdatedAtMs: int64(1 + (i*7919)%n),
			Status: fsmpb.SessionStatus_SESSION_STATUS_IDLE, Agent: []string{"coder", "writer"}[i%2]}
		if i%5 == 0 {
			s.Labels = []*fsmpb.Label{{Key: "team", Value: "red"}}
		}
		for _, tx := range []*store.Txn{wholeTx, txs[i%parts]} {
			tx.Put(store.TableSessions, s)
		}
	}
	wholeTx.Commit()
	for _, tx := range txs {
		tx.Commit()
	}
	for _, req := range []*dexv1.ListSessionsRequest{
		{PageSize: 37, Labels: apiLabels("team", "red"), Agent: "coder"},
		{PageSize: 50, OrderBy: dexv1.SessionOrder_SESSION_ORDER_UPDATED, Descending: true, Agent: "writer"},
		{PageSize: 1000, Labels: apiLabels("team", "red"), Agent: "writer", CreatedAfterMs: 100},
		// The status drives over every session; the created range is
		// checked per row, so each partition's pages stop at the scan bound.
		{PageSize: 40, Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, OrderBy: dexv1.SessionOrder_SESSION_ORDER_UPDATED,
			CreatedAfterMs: int64(n/4 - 60), CreatedBeforeMs: int64(n / 4)},
	} {
		q, err := parseListQuery(req)
		if err != nil {
			t.Fatal(err)
		}
		var want []*fsmpb.Session
		for after := (*store.ListPosition)(nil); ; {
			page, next := whole.Txn(false).ListSessions(q.filter, q.order, q.desc, after, n)
			want = append(want, page...)
			if next == nil {
				break
			}
			after = next
		}
		var got []string
		for range 1000 {
			q, err := parseListQuery(req)
			if err != nil {
				t.Fatal(err)
			}
			var pages []*dexv1.ListSessionsResponse
			for _, db := range dbs {
				page, next := db.Txn(false).ListSessions(q.filter, q.order, q.desc, q.after, q.size)
				resp := &dexv1.ListSessionsResponse{NextPageToken: listToken(next, q.order, q.desc)}
				for _, s := range page {
					resp.Sessions = append(resp.Sessions, sessionSummary(s))
				}
				pages = append(pages, resp)
			}
			merged, err := mergeSessionPages(q, pages)
			if err != nil {
				t.Fatal(err)
			}
			if len(merged.Sessions) > q.size {
				t.Fatalf("a merged page of %d holds %d", q.size, len(merged.Sessions))
			}
			got = append(got, summaryIDs(merged.Sessions)...)
			if merged.NextPageToken == "" {
				break
			}
			req.PageToken = merged.NextPageToken
		}
		var wantIDs []string
		for _, s := range want {
			wantIDs = append(wantIDs, s.Id)
		}
		if len(wantIDs) == 0 || !slices.Equal(got, wantIDs) {
			t.Fatalf("%v: merged pages read %d sessions, the whole store %d (first %v / %v)", req, len(got), len(wantIDs), got[:min(3, len(got))], wantIDs[:min(3, len(wantIDs))])
		}
	}
}

// Summaries with many long labels and a first message of the most bytes
// kept stop a page at pageBytes, and the token resumes after the last
// session the page holds.
func TestListSessionsPageStopsAtItsBytes(t *testing.T) {
	longFirst := strings.Repeat("m", firstMessageBytes)
	var page []*fsmpb.Session
	for i := range 300 {
		s := &fsmpb.Session{Id: fmt.Sprintf("s%03d", i), CreatedAtMs: int64(i + 1)}
		for k := range 32 {
			s.Labels = append(s.Labels, &fsmpb.Label{Key: fmt.Sprintf("k%02d", k), Value: strings.Repeat("v", 256)})
		}
		page = append(page, s)
	}
	for _, req := range []*dexv1.ListSessionsRequest{{}, {OrderBy: dexv1.SessionOrder_SESSION_ORDER_CREATED}} {
		q, err := parseListQuery(req)
		if err != nil {
			t.Fatal(err)
		}
		out := summaryPage(&dexv1.ListSessionsResponse{}, page, q, func(string) string { return longFirst })
		n := len(out.Sessions)
		if n == 0 || n == len(page) || proto.Size(out) > pageBytes+1024 || out.Sessions[0].FirstMessage != longFirst {
			t.Fatalf("a page of %d sessions, %d bytes", n, proto.Size(out))
		}
		last := out.Sessions[n-1]
		if q.byID {
			if out.NextPageToken != last.Id {
				t.Fatalf("token %q after %s", out.NextPageToken, last.Id)
			}
			continue
		}
		pos, err := parseListToken(out.NextPageToken, q.order, q.desc)
		if err != nil || pos.ID != last.Id || pos.At != last.CreatedAtMs {
			t.Fatalf("token %v, %v after %s", pos, err, last.Id)
		}
	}
	// Two partitions' whole pages merged also stop at pageBytes.
	q, _ := parseListQuery(&dexv1.ListSessionsRequest{OrderBy: dexv1.SessionOrder_SESSION_ORDER_CREATED})
	parts := []*dexv1.ListSessionsResponse{{}, {}}
	for i, s := range page {
		sum := sessionSummary(s)
		sum.FirstMessage = longFirst
		parts[i%2].Sessions = append(parts[i%2].Sessions, sum)
	}
	merged, err := mergeSessionPages(q, parts)
	if err != nil {
		t.Fatal(err)
	}
	n := len(merged.Sessions)
	if n == 0 || n == len(page) || proto.Size(merged) > pageBytes+1024 || merged.NextPageToken == "" {
		t.Fatalf("a merged page of %d sessions, %d bytes, token %q", n, proto.Size(merged), merged.NextPageToken)
	}
	if pos, _ := parseListToken(merged.NextPageToken, q.order, q.desc); pos == nil || pos.ID != merged.Sessions[n-1].Id {
		t.Fatalf("merged token %v after %s", pos, merged.Sessions[n-1].Id)
	}
}
