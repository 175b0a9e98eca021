package client

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/metadata"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// toPart is the route of a call of partition k (-1: none).
func toPart(k int) *callRoute { return &callRoute{hint: routeHint{partition: k}, partition: k} }

func done(md metadata.MD, err error) balancer.DoneInfo {
	return balancer.DoneInfo{Trailer: md, Err: err}
}

// The map learns the partition count from any routed call, a leader from
// a forward's trailer or from a node that served the call itself, and
// nothing from a call that failed there.
func TestPartitionMapLearnsFromTrailers(t *testing.T) {
	m := newPartitionMap()
	m.learn(toPart(-1), "a:1", done(metadata.Pairs(wirerules.PartitionsTrailer, "3"), nil))
	if m.count.Load() != 3 {
		t.Fatalf("count %d after a trailer of 3", m.count.Load())
	}
	m.learn(toPart(1), "a:1", done(metadata.Pairs(wirerules.PartitionsTrailer, "3", wirerules.LeaderTrailer, "b:2"), nil))
	if got := m.leader(1); got != "b:2" {
		t.Fatalf("partition 1's leader %q after a forward to b:2", got)
	}
	m.learn(toPart(2), "c:3", done(metadata.Pairs(wirerules.PartitionsTrailer, "3"), errors.New("refused")))
	if got := m.leader(2); got != "" {
		t.Fatalf("partition 2's leader %q after a failed call", got)
	}
	m.learn(toPart(2), "c:3", done(metadata.Pairs(wirerules.PartitionsTrailer, "3"), nil))
	if got := m.leader(2); got != "c:3" {
		t.Fatalf("partition 2's leader %q after c:3 served it", got)
	}
	// A follower's "dex-leader" (nothing applied) is not a partition map.
	m.learn(toPart(0), "a:1", done(metadata.Pairs(LeaderMetadataKey, "z:9"), errors.New("unavailable")))
	if got := m.leader(0); got != "" {
		t.Fatalf("partition 0's leader %q from a follower's refusal", got)
	}
	// Another count forgets the leaders.
	m.learn(toPart(-1), "a:1", done(metadata.Pairs(wirerules.PartitionsTrailer, "5"), nil))
	if m.count.Load() != 5 || m.leader(1) != "" {
		t.Fatalf("count %d, partition 1 at %q after the count changed", m.count.Load(), m.leader(1))
	}
}

// A call sent before the count was known teaches its partition's leader
// with the count its answer brings: its session's partition when it names
// one, its hinted partition when it names that; a call that names neither
// teaches the count only.
func TestTheFirstCallTeachesItsPartitionsLeader(t *testing.T) {
	m := newPartitionMap()
	first := func(ctx context.Context, method string, req any) *callRoute {
		return m.route(ctx, method, req).Value(callRouteKey{}).(*callRoute)
	}
	id := "ses-first"
	r := first(context.Background(), "/dex.v1.SessionService/CreateSession", &dexv1.CreateSessionRequest{SessionId: id})
	if r.partition != -1 {
		t.Fatalf("partition %d before the count is known", r.partition)
	}
	m.learn(r, "a:1", done(metadata.Pairs(wirerules.PartitionsTrailer, "3"), nil))
	if got := m.leader(wirerules.PartitionOf(id, 3)); got != "a:1" {
		t.Fatalf("the leader of the created session's partition is %q after a:1 served it; want a:1", got)
	}
	m = newPartitionMap()
	poll := first(toPartitionNumber(context.Background(), 2), "/dex.v1.WorkerService/PollTask", &dexv1.PollTaskRequest{})
	m.learn(poll, "b:2", done(metadata.Pairs(wirerules.PartitionsTrailer, "3", wirerules.LeaderTrailer, "c:3"), nil))
	if got := m.leader(2); got != "c:3" {
		t.Fatalf("partition 2's leader %q after a first poll forwarded to c:3", got)
	}
	m = newPartitionMap()
	list := first(context.Background(), "/dex.v1.SessionService/ListSessions", &dexv1.ListSessionsRequest{})
	m.learn(list, "a:1", done(metadata.Pairs(wirerules.PartitionsTrailer, "3"), nil))
	for k := range 3 {
		if got := m.leader(k); got != "" {
			t.Fatalf("partition %d's leader %q from a call of no partition", k, got)
		}
	}
}

// A call's partition comes from its request, or from the hint a stream or
// a poll carries; with one partition (or none known) it has none.
func TestCallsAreRoutedByTheirSession(t *testing.T) {
	m := newPartitionMap()
	routeOf := func(ctx context.Context, method string, req any) int {
		return m.route(ctx, method, req).Value(callRouteKey{}).(*callRoute).partition
	}
	id := "ses-route"
	if k := routeOf(context.Background(), "/dex.v1.SessionService/GetSession", &dexv1.GetSessionRequest{SessionId: id}); k != -1 {
		t.Fatalf("partition %d before the count is known", k)
	}
	m.count.Store(4)
	want := wirerules.PartitionOf(id, 4)
	for _, c := range []struct {
		ctx    context.Context
		method string
		req    any
		want   int
	}{
		{context.Background(), "/dex.v1.SessionService/GetSession", &dexv1.GetSessionRequest{SessionId: id}, want},
		{context.Background(), "/dex.v1.WorkerService/CompleteTask", &dexv1.CompleteTaskRequest{Ref: &dexv1.AttemptRef{StepId: wirerules.StepID(id, 3)}}, want},
		{context.Background(), "/dex.v1.SessionService/ListSessions", &dexv1.ListSessionsRequest{}, -1},
		{context.Background(), "/dex.v1.SessionService/CreateSession", &dexv1.CreateSessionRequest{Message: "no id"}, -1},
		{toSession(context.Background(), id), "/dex.v1.SessionService/WatchSession", nil, want},
		{toPartitionNumber(context.Background(), 3), "/dex.v1.WorkerService/PollTask", &dexv1.PollTaskRequest{}, 3},
	} {
		if k := routeOf(c.ctx, c.method, c.req); k != c.want {
			t.Errorf("%s %v: partition %d, want %d", c.method, c.req, k, c.want)
		}
	}
}

// In a cluster of one partition every call is the leader's, even one that
// names no session, so none takes a follower's hop once the leader is known.
func TestEveryCallOfOnePartitionGoesToItsLeader(t *testing.T) {
	m := newPartitionMap()
	m.count.Store(1)
	for _, c := range []struct {
		method string
		req    any
	}{
		{"/dex.v1.SessionService/GetSession", &dexv1.GetSessionRequest{SessionId: "ses-one"}},
		{"/dex.v1.SessionService/ListSessions", &dexv1.ListSessionsRequest{}},
		{"/dex.v1.SessionService/CreateSession", &dexv1.CreateSessionRequest{Message: "no id"}},
		{"/dex.v1.WorkerService/PollTask", &dexv1.PollTaskRequest{}},
	} {
		if k := m.route(context.Background(), c.method, c.req).Value(callRouteKey{}).(*callRoute).partition; k != 0 {
			t.Errorf("%s: partition %d, want 0", c.method, k)
		}
	}
}
