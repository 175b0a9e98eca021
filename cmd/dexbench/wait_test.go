package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// fakeSessions answers ListSessions the way the server pages: ids sorted,
// after the token (exclusive), page_size at most; it records each request.
type fakeSessions struct {
	dexv1.SessionServiceClient
	sessions []*dexv1.SessionSummary
	reqs     []*dexv1.ListSessionsRequest
	err      error
}

func (f *fakeSessions) ListSessions(ctx context.Context, req *dexv1.ListSessionsRequest, _ ...grpc.CallOption) (*dexv1.ListSessionsResponse, error) {
	f.reqs = append(f.reqs, req)
	if f.err != nil {
		return nil, f.err
	}
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	limit := int(req.PageSize)
	if limit == 0 {
		limit = 1000
	}
	out := &dexv1.ListSessionsResponse{}
	for _, s := range f.sessions {
		if s.Id <= req.PageToken {
			continue
		}
		if len(out.Sessions) == limit {
			out.NextPageToken = out.Sessions[limit-1].Id
			break
		}
		out.Sessions = append(out.Sessions, s)
	}
	return out, nil
}

func summaries(prefix string, n int, status dexv1.SessionStatus, turns uint64) []*dexv1.SessionSummary {
	var out []*dexv1.SessionSummary
	for i := range n {
		out = append(out, &dexv1.SessionSummary{Id: sessionID(prefix, i), Status: status, TurnsCompleted: turns})
	}
	return out
}

func newFake(groups ...[]*dexv1.SessionSummary) *fakeSessions {
	f := &fakeSessions{}
	for _, g := range groups {
		f.sessions = append(f.sessions, g...)
	}
	slices.SortFunc(f.sessions, func(a, b *dexv1.SessionSummary) int { return strings.Compare(a.Id, b.Id) })
	return f
}

const idle = dexv1.SessionStatus_SESSION_STATUS_IDLE

func TestCountDone_ReadsOnlyTheRunsSessionsFromItsPrefix(t *testing.T) {
	f := newFake(
		summaries("aaa", 50, idle, 1),
		summaries("bench", 30, idle, 1),
		summaries("idle", 5000, idle, 1),
	)
	done, err := countDone(context.Background(), f, idRange{prefix: "bench", n: 30})
	if err != nil || done != 30 {
		t.Fatalf("countDone = %d, %v; want 30 done", done, err)
	}
	if len(f.reqs) != 1 || f.reqs[0].PageToken != "bench-" || f.reqs[0].PageSize != 30 {
		t.Fatalf("requests %v; want one page of 30 from token bench-", f.reqs)
	}
}

func TestCountDone_CountsOnlyFinishedSessionsAndStopsAtThePrefixEnd(t *testing.T) {
	s := summaries("bench", 10, idle, 1)
	s[2].TurnsCompleted = 0 // created, turn not yet run
	s[3].Status = dexv1.SessionStatus_SESSION_STATUS_RUNNING
	s[4].Status = dexv1.SessionStatus_SESSION_STATUS_ERRORED
	s[5].Status = dexv1.SessionStatus_SESSION_STATUS_PAUSED
	s = s[:9] // bench-000009 not created yet: the page reaches idle-…
	f := newFake(s, summaries("idle", 100, idle, 1))
	done, err := countDone(context.Background(), f, idRange{prefix: "bench", n: 10})
	if err != nil || done != 7 {
		t.Fatalf("countDone = %d, %v; want 7 (9 created, one not started, one running)", done, err)
	}
}

func TestCountDone_ABatchPagesFromTheIdBeforeIt(t *testing.T) {
	f := newFake(summaries("idle", 25000, idle, 1))
	r := idRange{prefix: "idle", from: 500, n: 12000}
	done, err := countDone(context.Background(), f, r)
	if err != nil || done != 12000 {
		t.Fatalf("countDone = %d, %v; want 12000", done, err)
	}
	if f.reqs[0].PageToken != "idle-000499" {
		t.Fatalf("first token %q; want idle-000499", f.reqs[0].PageToken)
	}
	if len(f.reqs) != 2 || f.reqs[1].PageToken != "idle-010499" || f.reqs[1].PageSize != 10000 {
		t.Fatalf("requests %v; want a second page of up to 10000 after idle-010499", f.reqs)
	}
}

func TestCountDone_ReturnsTheServersError(t *testing.T) {
	f := newFake(summaries("bench", 3, idle, 1))
	f.err = status.Error(codes.Unavailable, "not the leader")
	if _, err := countDone(context.Background(), f, idRange{prefix: "bench", n: 3}); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v; want Unavailable", err)
	}
}

func TestWaitDone_GivesUpWhenTheContextEnds(t *testing.T) {
	f := newFake(summaries("bench", 2, dexv1.SessionStatus_SESSION_STATUS_RUNNING, 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := waitDone(ctx, f, newFinishes(), idRange{prefix: "bench", n: 2})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "bench-000000…bench-000001 not done") {
		t.Fatalf("err = %v; want the range not done, context canceled", err)
	}
}

func TestWaitDone_ReturnsWhenTheWorkersSawEveryTurnEnd(t *testing.T) {
	f := newFake(summaries("bench", 4, dexv1.SessionStatus_SESSION_STATUS_RUNNING, 0))
	fin := newFinishes()
	r := idRange{prefix: "bench", n: 4}
	for i := range r.n {
		fin.answered(fmt.Sprintf("step-%d", i), r.id(i))
	}
	fin.completed("step-0")
	fin.completed("not-a-final-answer")
	if n, _ := fin.done(r); n != 1 {
		t.Fatalf("done = %d after one final Complete; want 1", n)
	}
	go func() {
		for i := 1; i < r.n; i++ {
			fin.completed(fmt.Sprintf("step-%d", i))
		}
	}()
	end, err := waitDone(context.Background(), f, fin, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, last := fin.done(r); !end.Equal(last) {
		t.Fatalf("end = %v; want the last Complete's time %v", end, last)
	}
	if len(f.reqs) != 0 {
		t.Fatalf("%d ListSessions calls; want none while the Workers report every turn", len(f.reqs))
	}
}

func TestWaitDone_ListsTheSessionsTheWorkersDidNotSeeEnd(t *testing.T) {
	// Two errored sessions end without a final answer: only the listing
	// sees them done.
	f := newFake(summaries("bench", 2, dexv1.SessionStatus_SESSION_STATUS_ERRORED, 0))
	if _, err := waitDone(context.Background(), f, newFinishes(), idRange{prefix: "bench", n: 2}); err != nil {
		t.Fatal(err)
	}
	if len(f.reqs) == 0 {
		t.Fatal("no ListSessions call; want the listing to find the errored sessions")
	}
}

func TestOptionsCheck_RefusesBadFlags(t *testing.T) {
	good := options{workers: 4, concurrency: 8, sessions: 200, toolsPerTurn: 2, warmup: 8, idleBatch: 500, runs: 1, partitions: 1}
	if err := good.check(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for name, edit := range map[string]func(*options){
		"negative idle sessions": func(o *options) { o.idleSessions = -1 },
		"zero idle batch":        func(o *options) { o.idleBatch = 0 },
		"negative sequential":    func(o *options) { o.sequential = -1 },
		"idle past the id width": func(o *options) { o.idleSessions = maxIndex + 1 },
		"sessions past it":       func(o *options) { o.sessions = maxIndex + 1 },
		"sequential past it":     func(o *options) { o.sequential = maxIndex + 1 },
		"no workers":             func(o *options) { o.workers = 0 },
		"zero runs":              func(o *options) { o.runs = 0 },
		"negative partitions":    func(o *options) { o.partitions = -1 },
		"65 partitions":          func(o *options) { o.partitions = 65 },
		"negative list pages":    func(o *options) { o.idleSessions, o.listPages = 10, -1 },
		"list with no idle load": func(o *options) { o.listPages = 10 },
	} {
		o := good
		edit(&o)
		if err := o.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	listed := good
	listed.idleSessions, listed.listPages = 100_000, 200
	if err := listed.check(); err != nil {
		t.Errorf("100,000 idle sessions listed 200 pages a filter: %v", err)
	}
}

func TestReadProcMem_ReadsThisProcess(t *testing.T) {
	m := readProcMem(os.Getpid())
	if m.RSS <= 0 || m.HWM < m.RSS {
		t.Fatalf("readProcMem = %+v; want RSS > 0 and HWM ≥ RSS", m)
	}
	if got := readProcMem(-1); got != (procMem{}) {
		t.Fatalf("readProcMem(-1) = %+v; want zero", got)
	}
}

func TestGrowthPerSession(t *testing.T) {
	before := memSample{Nodes: map[string]procMem{"n1": {RSS: 100 << 20}}}
	after := memSample{Nodes: map[string]procMem{"n1": {RSS: 130 << 20}}}
	if got := growthPerSession(before, after, "n1", 10000); got != 3145.7 {
		t.Fatalf("growth = %v; want 3145.7 B", got)
	}
	if got := growthPerSession(before, after, "n2", 10000); got != 0 {
		t.Fatalf("growth of an unknown node = %v; want 0", got)
	}
}

func TestSummarize_TakesTheMedianOfEachFigure(t *testing.T) {
	reps := []*report{
		{StepsPerSec: 700, MachineBusy: 88, Dispatch: &dist{P50: 200, P99: 400}},
		{StepsPerSec: 900, MachineBusy: 90, Dispatch: &dist{P50: 100, P99: 300}},
		{StepsPerSec: 800, MachineBusy: 86, Dispatch: &dist{P50: 150, P99: 500}},
	}
	s := summarize(reps)
	if s.Runs != 3 || s.MedianStepsPS != 800 || s.MedianP50 != 150 || s.MedianP99 != 400 || s.MedianBusy != 88 {
		t.Fatalf("summary %+v; want 3 runs, medians 800 steps/s, p50 150, p99 400, busy 88", s)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("median of an even count = %v; want 2.5", m)
	}
}

func TestFinishes_CountsEachRangeOwnSessionsOnce(t *testing.T) {
	fin := newFinishes()
	first, second := idRange{prefix: "bench", n: 2}, idRange{prefix: "bench", from: 2, n: 2}
	other := idRange{prefix: "idle", n: 2}
	for _, r := range []idRange{first, second, other} {
		if n, _ := fin.done(r); n != 0 {
			t.Fatalf("done(%v) = %d before any Complete; want 0", r, n)
		}
	}
	finish := func(step, session string) {
		fin.answered(step, session)
		fin.completed(step)
	}
	finish("a", first.id(1))
	finish("b", first.id(1)) // the same session's next turn
	finish("c", second.id(0))
	finish("d", "bench-x0002") // not a session of any range
	if n, _ := fin.done(first); n != 1 {
		t.Fatalf("first range done = %d; want 1 (one session, finished twice)", n)
	}
	if n, _ := fin.done(second); n != 1 {
		t.Fatalf("second range done = %d; want 1", n)
	}
	if n, _ := fin.done(other); n != 0 {
		t.Fatalf("other prefix done = %d; want 0", n)
	}
	// A range asked about only now counts what finished before.
	if n, _ := fin.done(idRange{prefix: "bench", n: 4}); n != 2 {
		t.Fatalf("whole range done = %d; want 2", n)
	}
}
