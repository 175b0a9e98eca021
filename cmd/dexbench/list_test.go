package main

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestMeasureList_PagesOnWithTheTokenAndFromTheFirstPageWhenTheListEnds(t *testing.T) {
	s := summaries("idle", 120, idle, 1)
	for _, x := range s[:100] {
		x.FirstMessage = "go"
	}
	f := newFake(s)
	rs, err := measureList(context.Background(), f, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(listQueries) {
		t.Fatalf("%d results; want one per filter (%d)", len(rs), len(listQueries))
	}
	// The fake filters nothing: 50, 50, 20, then the first page again.
	want := []string{"", "idle-000049", "idle-000099", ""}
	for i, req := range f.reqs[:4] {
		if req.PageToken != want[i] || req.PageSize != listPageSize {
			t.Errorf("request %d: token %q, size %d; want %q, %d", i, req.PageToken, req.PageSize, want[i], listPageSize)
		}
	}
	r := rs[0]
	if r.Filter != listQueries[0].name || r.Pages.N != 4 || r.SessionsPerPage != 42.5 || r.FirstMessagesPerPage != 37.5 {
		t.Fatalf("first filter: %+v; want 4 pages, 170/4 sessions and 150/4 first messages a page", r)
	}
	if len(f.reqs) != 4*len(listQueries) {
		t.Fatalf("%d calls; want 4 per filter", len(f.reqs))
	}
	for i, q := range listQueries {
		if got := f.reqs[4*i]; got.PageToken != "" {
			t.Errorf("%s started from token %q; want its first page", q.name, got.PageToken)
		}
	}
}

func TestMeasureList_StopsAtTheServersError(t *testing.T) {
	f := newFake(summaries("idle", 10, idle, 1))
	f.err = status.Error(codes.Unavailable, "not the leader")
	if _, err := measureList(context.Background(), f, 3); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v; want Unavailable", err)
	}
	if len(f.reqs) != 1 {
		t.Fatalf("%d calls after an error; want 1", len(f.reqs))
	}
}

func TestListShape_GivesEachIdleSessionAnAgentOfTheListWorkers(t *testing.T) {
	agents := map[string]bool{}
	for _, a := range listAgents() {
		agents[a] = true
	}
	for i := range 60 {
		req := &dexv1.CreateSessionRequest{}
		listShape(i, req)
		if !agents[req.Agent] || len(req.Labels) != 2 {
			t.Fatalf("session %d: agent %q, labels %v; want one of the list Workers' agents and a team and an env", i, req.Agent, req.Labels)
		}
	}
}
