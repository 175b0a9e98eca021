package client

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// labelSessions answers ListSessions with pages[the request's token] and
// keeps every request. SetLabels commits each call but loses the answer of
// the first lostAnswers (Unavailable, naming no leader), and answers
// NotFound for any session but "s1".
type labelSessions struct {
	dexv1.UnimplementedSessionServiceServer

	mu          sync.Mutex
	pages       map[string]*dexv1.ListSessionsResponse
	lists       []*dexv1.ListSessionsRequest
	sets        []*dexv1.SetLabelsRequest
	lostAnswers int
	labels      map[string]string
}

func (f *labelSessions) ListSessions(_ context.Context, req *dexv1.ListSessionsRequest) (*dexv1.ListSessionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, proto.Clone(req).(*dexv1.ListSessionsRequest))
	resp, ok := f.pages[req.PageToken]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "page token %q is not one of this order", req.PageToken)
	}
	return resp, nil
}

func (f *labelSessions) SetLabels(_ context.Context, req *dexv1.SetLabelsRequest) (*dexv1.SetLabelsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, proto.Clone(req).(*dexv1.SetLabelsRequest))
	if req.SessionId != "s1" {
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
	}
	for _, k := range req.Remove {
		delete(f.labels, k)
	}
	for _, l := range req.Set {
		f.labels[l.Key] = l.Value
	}
	if f.lostAnswers > 0 {
		f.lostAnswers--
		return nil, status.Error(codes.Unavailable, "connection reset")
	}
	return &dexv1.SetLabelsResponse{Session: &dexv1.Session{Id: req.SessionId, Labels: Labels(f.labels)}}, nil
}

// calls returns the requests the fake received.
func (f *labelSessions) calls() (lists []*dexv1.ListSessionsRequest, sets []*dexv1.SetLabelsRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lists), slices.Clone(f.sets)
}

func startLabelSessions(t *testing.T, f *labelSessions) (*Client, context.Context) {
	t.Helper()
	if f.labels == nil {
		f.labels = map[string]string{}
	}
	n := startNode(t, "A", nil, f)
	n.setServing(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return dialClient(t, []*node{n}), ctx
}

func summaries(ids ...string) []*dexv1.SessionSummary {
	var out []*dexv1.SessionSummary
	for _, id := range ids {
		out = append(out, &dexv1.SessionSummary{Id: id})
	}
	return out
}

func idsOf(ss []*dexv1.SessionSummary) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Id)
	}
	return out
}

// shortPages is a filtered list as a server may answer it: a page of two,
// an empty page, a page of one and two more empty pages, each with a
// token, until the last one.
func shortPages() map[string]*dexv1.ListSessionsResponse {
	return map[string]*dexv1.ListSessionsResponse{
		"":   {Sessions: summaries("a", "b"), NextPageToken: "t1"},
		"t1": {NextPageToken: "t2"},
		"t2": {Sessions: summaries("c"), NextPageToken: "t3"},
		"t3": {NextPageToken: "t4"},
		"t4": {},
	}
}

func TestListSessionsMatching_EveryFilterReachesTheRequest(t *testing.T) {
	f := &labelSessions{pages: map[string]*dexv1.ListSessionsResponse{"from-here": {Sessions: summaries("x")}}}
	c, ctx := startLabelSessions(t, f)
	req := &dexv1.ListSessionsRequest{
		PageSize: 7, PageToken: "from-here", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, Agent: "coder",
		Labels: Labels(map[string]string{"team": "red", "env": "prod"}), ParentId: "p1",
		CreatedAfterMs: 1, CreatedBeforeMs: 2, UpdatedAfterMs: 3, UpdatedBeforeMs: 4,
		OrderBy: dexv1.SessionOrder_SESSION_ORDER_UPDATED, Descending: true, ForkedFrom: "src",
	}
	// Every field of the request is set here, so a field the client drops
	// (or one added to the API and not passed on) fails the test.
	fields := req.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if !req.ProtoReflect().Has(fields.Get(i)) {
			t.Fatalf("the test sets no %s", fields.Get(i).Name())
		}
	}
	before := proto.Clone(req)
	got, err := c.ListSessionsMatching(ctx, req, 0)
	if err != nil || !slices.Equal(idsOf(got), []string{"x"}) {
		t.Fatalf("ListSessionsMatching: %v, %v", idsOf(got), err)
	}
	lists, _ := f.calls()
	if len(lists) != 1 || !proto.Equal(lists[0], req) {
		t.Fatalf("the server got %v; want the request as given, %v", lists, req)
	}
	if !proto.Equal(req, before) {
		t.Fatalf("the caller's request changed: %v, was %v", req, before)
	}
}

func TestListSessionsMatching_ReadsThroughShortAndEmptyPagesUntilNoToken(t *testing.T) {
	f := &labelSessions{pages: shortPages()}
	c, ctx := startLabelSessions(t, f)
	req := &dexv1.ListSessionsRequest{Labels: Labels(map[string]string{"team": "red"}), Agent: "coder"}
	before := proto.Clone(req)
	got, err := c.ListSessionsMatching(ctx, req, 0)
	if err != nil || !slices.Equal(idsOf(got), []string{"a", "b", "c"}) {
		t.Fatalf("got %v, %v; want a, b, c", idsOf(got), err)
	}
	lists, _ := f.calls()
	var tokens []string
	for _, l := range lists {
		tokens = append(tokens, l.PageToken)
		l.PageToken = ""
		if !proto.Equal(l, before) {
			t.Fatalf("a page's request %v lost the filter %v", l, before)
		}
	}
	if !slices.Equal(tokens, []string{"", "t1", "t2", "t3", "t4"}) {
		t.Fatalf("pages read with tokens %q; want every page until the token is empty", tokens)
	}
	if !proto.Equal(req, before) {
		t.Fatalf("the caller's request changed: %v, was %v", req, before)
	}
	// nil is every session, through the same pages.
	if got, err := c.ListSessionsMatching(ctx, nil, 0); err != nil || len(got) != 3 {
		t.Fatalf("nil request: %v, %v", idsOf(got), err)
	}
}

func TestListSessionsMatching_StopsAtTheLimit(t *testing.T) {
	for _, tc := range []struct {
		limit, pageSize int
		want            []string
		tokens          []string
		sizes           []uint32
	}{
		{limit: 1, want: []string{"a"}, tokens: []string{""}, sizes: []uint32{0}},
		{limit: 2, want: []string{"a", "b"}, tokens: []string{""}, sizes: []uint32{0}},
		{limit: 3, want: []string{"a", "b", "c"}, tokens: []string{"", "t1", "t2"}, sizes: []uint32{0, 0, 0}},
		{limit: 9, want: []string{"a", "b", "c"}, tokens: []string{"", "t1", "t2", "t3", "t4"}, sizes: []uint32{0, 0, 0, 0, 0}},
		// A page asked larger than what is still wanted is asked smaller.
		{limit: 3, pageSize: 10, want: []string{"a", "b", "c"}, tokens: []string{"", "t1", "t2"}, sizes: []uint32{3, 1, 1}},
		{limit: 3, pageSize: 2, want: []string{"a", "b", "c"}, tokens: []string{"", "t1", "t2"}, sizes: []uint32{2, 1, 1}},
	} {
		f := &labelSessions{pages: shortPages()}
		c, ctx := startLabelSessions(t, f)
		req := &dexv1.ListSessionsRequest{PageSize: uint32(tc.pageSize), Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING}
		got, err := c.ListSessionsMatching(ctx, req, tc.limit)
		if err != nil || !slices.Equal(idsOf(got), tc.want) {
			t.Fatalf("limit %d: got %v, %v; want %v", tc.limit, idsOf(got), err, tc.want)
		}
		lists, _ := f.calls()
		var tokens []string
		var sizes []uint32
		for _, l := range lists {
			tokens, sizes = append(tokens, l.PageToken), append(sizes, l.PageSize)
		}
		if !slices.Equal(tokens, tc.tokens) || !slices.Equal(sizes, tc.sizes) {
			t.Fatalf("limit %d, page size %d: pages read with tokens %q and sizes %v; want %q and %v", tc.limit, tc.pageSize, tokens, sizes, tc.tokens, tc.sizes)
		}
		if req.PageSize != uint32(tc.pageSize) || req.PageToken != "" {
			t.Fatalf("the caller's request changed: %v", req)
		}
	}
}

// The list without a filter reads every page with requests that carry
// nothing but the page size and the token, as before filters existed.
func TestListSessions_WithoutFilterIsUnchanged(t *testing.T) {
	f := &labelSessions{pages: shortPages()}
	c, ctx := startLabelSessions(t, f)
	got, err := c.ListSessions(ctx)
	if err != nil || !slices.Equal(idsOf(got), []string{"a", "b", "c"}) {
		t.Fatalf("ListSessions: %v, %v", idsOf(got), err)
	}
	lists, _ := f.calls()
	for _, l := range lists {
		if !proto.Equal(l, &dexv1.ListSessionsRequest{PageToken: l.PageToken}) {
			t.Fatalf("an unfiltered list sent %v", l)
		}
	}
}

func TestSetLabels_SendsSortedSetAndRemoveAndIsRetried(t *testing.T) {
	f := &labelSessions{lostAnswers: 1, labels: map[string]string{"old": "x", "keep": "y"}}
	c, ctx := startLabelSessions(t, f)
	set := map[string]string{"team": "blue", "env": "prod", "tier": "1", "a": "", "zone": "eu", "b.c/d": "2", "k-9": "z", "m_n": "q"}
	s, err := c.SetLabels(ctx, "s1", set, []string{"old"})
	if err != nil {
		t.Fatalf("SetLabels after a lost answer: %v", err)
	}
	want := map[string]string{"keep": "y"}
	for k, v := range set {
		want[k] = v
	}
	if s.Id != "s1" || !proto.Equal(&dexv1.Session{Id: "s1", Labels: Labels(want)}, s) {
		t.Fatalf("SetLabels answered %v", s)
	}
	_, sets := f.calls()
	if len(sets) != 2 {
		t.Fatalf("%d calls; want the call retried once after Unavailable", len(sets))
	}
	wantReq := &dexv1.SetLabelsRequest{SessionId: "s1", Set: Labels(set), Remove: []string{"old"}}
	for i, r := range sets {
		if !proto.Equal(r, wantReq) {
			t.Fatalf("try %d sent %v; want %v", i+1, r, wantReq)
		}
	}
	for i := 1; i < len(wantReq.Set); i++ {
		if wantReq.Set[i-1].Key >= wantReq.Set[i].Key {
			t.Fatalf("set is not in key order: %v", wantReq.Set)
		}
	}
	// A definite refusal is not repeated.
	if _, err := c.SetLabels(ctx, "nobody", map[string]string{"team": "red"}, nil); status.Code(err) != codes.NotFound {
		t.Fatalf("an unknown session: %v", err)
	}
	if _, sets := f.calls(); len(sets) != 3 {
		t.Fatalf("%d calls after a NotFound; want it answered at once", len(sets)-2)
	}
}

func TestLabels_SortsByKey(t *testing.T) {
	got := Labels(map[string]string{"b": "2", "a": "1", "c": ""})
	want := []*dexv1.Label{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}, {Key: "c"}}
	if len(got) != len(want) {
		t.Fatalf("Labels: %v", got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("Labels: %v; want %v", got, want)
		}
	}
	if got := Labels(nil); len(got) != 0 {
		t.Fatalf("Labels(nil): %v", got)
	}
}

func TestLabelsAndFilters_BadInputIsRefusedBeforeAnyCall(t *testing.T) {
	f := &labelSessions{pages: shortPages()}
	c, ctx := startLabelSessions(t, f)
	lists := []struct {
		req   *dexv1.ListSessionsRequest
		limit int
		names string
	}{
		{&dexv1.ListSessionsRequest{}, -1, "limit -1"},
		{&dexv1.ListSessionsRequest{Status: 99}, 0, "status 99"},
		{&dexv1.ListSessionsRequest{OrderBy: 7}, 0, "order_by 7"},
		{&dexv1.ListSessionsRequest{CreatedAfterMs: -1}, 0, "created_after_ms -1"},
		{&dexv1.ListSessionsRequest{CreatedBeforeMs: -2}, 0, "created_before_ms -2"},
		{&dexv1.ListSessionsRequest{UpdatedAfterMs: -3}, 0, "updated_after_ms -3"},
		{&dexv1.ListSessionsRequest{UpdatedBeforeMs: -4}, 0, "updated_before_ms -4"},
		{&dexv1.ListSessionsRequest{Labels: []*dexv1.Label{{Key: "team", Value: "red"}, {Value: "x"}}}, 0, "labels[1]: an empty label key"},
		{&dexv1.ListSessionsRequest{Labels: []*dexv1.Label{{Key: "team", Value: "red"}, {Key: "team", Value: "blue"}}}, 0, `key "team" is given twice`},
		{&dexv1.ListSessionsRequest{Labels: []*dexv1.Label{nil}}, 0, "labels[0]"},
	}
	for _, tc := range lists {
		if _, err := c.ListSessionsMatching(ctx, tc.req, tc.limit); err == nil || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("ListSessionsMatching(%v, %d): %v; want an error naming %q", tc.req, tc.limit, err, tc.names)
		}
	}
	sets := []struct {
		id     string
		set    map[string]string
		remove []string
		names  string
	}{
		{"", map[string]string{"team": "red"}, nil, "session id"},
		{"s1", map[string]string{"": "red"}, nil, "set: an empty label key"},
		{"s1", nil, []string{"env", ""}, "remove[1]: an empty label key"},
		{"s1", nil, []string{"env", "env"}, `remove: key "env" is given twice`},
		{"s1", map[string]string{"env": "prod"}, []string{"env"}, `key "env" is both in set and in remove`},
	}
	for _, tc := range sets {
		if _, err := c.SetLabels(ctx, tc.id, tc.set, tc.remove); err == nil || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("SetLabels(%q, %v, %v): %v; want an error naming %q", tc.id, tc.set, tc.remove, err, tc.names)
		}
	}
	if lists, sets := f.calls(); len(lists)+len(sets) != 0 {
		t.Fatalf("bad input reached the server: %v, %v", lists, sets)
	}
}
