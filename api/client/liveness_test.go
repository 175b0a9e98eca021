package client

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A node's prober runs while the channel holds a connection to it and
// ends when the channel is closed.
func TestLivenessProbesOnlyWhileConnected(t *testing.T) {
	nodes, _ := startSessionNodes(t, 1)
	l := newLiveness()
	conn, err := grpc.NewClient("passthrough:///"+nodes[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(l.dial))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	probing := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.probes[nodes[0].addr]
	}
	if !probing() {
		t.Fatal("no prober for a connected node")
	}
	_ = conn.Close()
	for probing() {
		if ctx.Err() != nil {
			t.Fatal("the prober outlived the channel")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A live node that answers its probes keeps its connections.
func TestLivenessKeepsANodeThatAnswers(t *testing.T) {
	nodes, _ := startSessionNodes(t, 1)
	l := newLiveness()
	conn, err := grpc.NewClient("passthrough:///"+nodes[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(l.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	conns := func() []*trackedConn {
		l.mu.Lock()
		defer l.mu.Unlock()
		var out []*trackedConn
		for c := range l.conns[nodes[0].addr] {
			out = append(out, c)
		}
		return out
	}
	before := conns()
	time.Sleep(3 * ProbeInterval)
	after := conns()
	if len(before) != 1 || len(after) != 1 || before[0] != after[0] {
		t.Fatalf("connections to a live node: %v, then %v; want the one kept", before, after)
	}
}
