package client

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// fakeSessions answers GetSession with the name of the node that served it.
type fakeSessions struct {
	dexv1.UnimplementedSessionServiceServer
	n *node

	mu          sync.Mutex
	keys        []string
	sendFails   int
	watchCalls  []uint64
	createCalls int
	created     map[string]bool
}

func (s *fakeSessions) gate(ctx context.Context) error {
	if !s.n.isServing() {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderMetadataKey, "elsewhere:1"))
		return status.Error(codes.Unavailable, "not the leader")
	}
	return nil
}

func (s *fakeSessions) GetSession(ctx context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	if err := s.gate(ctx); err != nil {
		return nil, err
	}
	return &dexv1.GetSessionResponse{Session: &dexv1.Session{Id: req.SessionId + "@" + s.n.name}}, nil
}

func (s *fakeSessions) SendMessage(ctx context.Context, req *dexv1.SendMessageRequest) (*dexv1.SendMessageResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dup := slices.Contains(s.keys, req.IdempotencyKey)
	s.keys = append(s.keys, req.IdempotencyKey)
	if s.sendFails > 0 {
		s.sendFails--
		// Committed, but the answer is lost.
		return nil, status.Error(codes.Unavailable, "connection reset")
	}
	return &dexv1.SendMessageResponse{Duplicate: dup}, nil
}

func (s *fakeSessions) CreateSession(ctx context.Context, req *dexv1.CreateSessionRequest) (*dexv1.CreateSessionResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createCalls++
	if s.created[req.SessionId] {
		return nil, status.Error(codes.AlreadyExists, "exists")
	}
	s.created[req.SessionId] = true
	if s.createCalls == 1 {
		return nil, status.Error(codes.Unavailable, "answer lost")
	}
	return &dexv1.CreateSessionResponse{Session: &dexv1.Session{Id: req.SessionId}}, nil
}

func (s *fakeSessions) WatchSession(req *dexv1.WatchSessionRequest, stream dexv1.SessionService_WatchSessionServer) error {
	s.mu.Lock()
	s.watchCalls = append(s.watchCalls, req.AfterSeq)
	first := len(s.watchCalls) == 1
	s.mu.Unlock()
	end := uint64(5)
	if first {
		end = 3
	}
	for seq := req.AfterSeq + 1; seq <= end; seq++ {
		if err := stream.Send(&dexv1.Event{Seq: seq, SessionId: req.SessionId, Type: "e"}); err != nil {
			return err
		}
	}
	if first {
		return status.Error(codes.Unavailable, "leadership lost")
	}
	return nil
}

func startSessionNodes(t *testing.T, count int) ([]*node, []*fakeSessions) {
	var nodes []*node
	var fakes []*fakeSessions
	for i := range count {
		fs := &fakeSessions{created: map[string]bool{}}
		n := startNode(t, string(rune('A'+i)), nil, fs)
		fs.n = n
		nodes = append(nodes, n)
		fakes = append(fakes, fs)
	}
	nodes[0].setServing(true)
	return nodes, fakes
}

func dialClient(t *testing.T, nodes []*node) *Client {
	conn, err := Dial(target(nodes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return New(conn)
}

func TestDialFollowsHealth(t *testing.T) {
	nodes, _ := startSessionNodes(t, 2)
	c := dialClient(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	served := func() string {
		t.Helper()
		r, err := c.GetSession(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		return r.Session.Id
	}
	for range 20 {
		if got := served(); got != "s@A" {
			t.Fatalf("served by %s, want A", got)
		}
	}
	nodes[0].setServing(false)
	nodes[1].setServing(true)
	deadline := time.Now().Add(5 * time.Second)
	for served() != "s@B" {
		if time.Now().After(deadline) {
			t.Fatal("calls did not move to B")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 20 {
		if got := served(); got != "s@B" {
			t.Fatalf("served by %s after the flip, want B", got)
		}
	}
	// No node serving for a while: a read waits and then goes through.
	nodes[1].setServing(false)
	go func() {
		time.Sleep(300 * time.Millisecond)
		nodes[0].setServing(true)
	}()
	if got := served(); got != "s@A" {
		t.Fatalf("served by %s, want A", got)
	}
}

func TestDialRejectsEmptyTarget(t *testing.T) {
	if _, err := Dial("dex:///"); err == nil {
		t.Fatal("dex:/// with no address was accepted")
	}
}

func TestSendMessageRetriesWithSameKey(t *testing.T) {
	nodes, fakes := startSessionNodes(t, 1)
	fakes[0].sendFails = 1
	c := dialClient(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dup, err := c.SendMessage(ctx, "s1", "hello", "")
	if err != nil || dup {
		t.Fatalf("SendMessage: dup %v err %v", dup, err)
	}
	fakes[0].mu.Lock()
	keys := append([]string(nil), fakes[0].keys...)
	fakes[0].mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("keys %v, want one generated key sent twice", keys)
	}
	if _, err := c.SendMessage(ctx, "s1", "hello", "mine"); err != nil {
		t.Fatal(err)
	}
	dup, err = c.SendMessage(ctx, "s1", "hello", "mine")
	if err != nil || !dup {
		t.Fatalf("repeat with the caller's key: dup %v err %v", dup, err)
	}
}

func TestCreateSessionWithIDIsRetried(t *testing.T) {
	nodes, fakes := startSessionNodes(t, 1)
	c := dialClient(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s9", Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	// The first try committed but its answer was lost; the retry found it.
	if s.Id != "s9@A" || fakes[0].createCalls != 2 {
		t.Fatalf("session %v after %d calls", s, fakes[0].createCalls)
	}
}

func TestWatchSessionResumesAfterUnavailable(t *testing.T) {
	nodes, fakes := startSessionNodes(t, 1)
	c := dialClient(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []uint64
	err := c.WatchSession(ctx, "s1", 0, func(e *dexv1.Event) error {
		got = append(got, e.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("events %v", got)
	}
	fakes[0].mu.Lock()
	defer fakes[0].mu.Unlock()
	if !slices.Equal(fakes[0].watchCalls, []uint64{0, 3}) {
		t.Fatalf("watch calls after %v, want [0 3]", fakes[0].watchCalls)
	}
}
