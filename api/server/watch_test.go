package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm/fsmpb"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// singleNode starts a one-node cluster with its gRPC server on loopback and
// returns the node and a SessionService client of it.
func singleNode(t *testing.T) (*cluster.Node, dexv1.SessionServiceClient) {
	t.Helper()
	node, _, conn := serveSingleNode(t, Options{})
	return node, dexv1.NewSessionServiceClient(conn)
}

// serveSingleNode starts a one-node cluster with a server of opts on
// loopback, waits until it is ready and returns the node, the server and a
// plaintext channel to it; all stop when the test ends.
func serveSingleNode(t *testing.T, opts Options) (*cluster.Node, *Server, *grpc.ClientConn) {
	t.Helper()
	return serveNode(t, singleNodeConfig(t), opts)
}

// singleNodeConfig is a one-node cluster on free loopback ports.
func singleNodeConfig(t *testing.T) cluster.Config {
	raftAddr, grpcAddr := freeAddr(t), freeAddr(t)
	return cluster.Config{
		ID: "n1", DataDir: t.TempDir(), RaftAddr: raftAddr, GRPCAddr: grpcAddr,
		Peers:            []cluster.Peer{{ID: "n1", RaftAddr: raftAddr}},
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		StepDownTimeout: 250 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	}
}

// raftPortTaken reports whether opening the one-node cluster cfg failed
// because its raft port was taken.
func raftPortTaken(cfg cluster.Config, err error) bool {
	return len(cfg.Peers) == 1 && cfg.Peers[0].RaftAddr == cfg.RaftAddr &&
		strings.Contains(err.Error(), "listen on raft address") && strings.Contains(err.Error(), "address already in use")
}

// serveNode opens a node of cfg and serves it as serveSingleNode does.
func serveNode(t *testing.T, cfg cluster.Config, opts Options) (*cluster.Node, *Server, *grpc.ClientConn) {
	t.Helper()
	// The gRPC port is taken back before the node opens, so no other test
	// process grabs it in between.
	lis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.Open(cfg, cluster.Hooks{})
	for tries := 0; err != nil && raftPortTaken(cfg, err) && tries < 3; tries++ {
		// Another test process bound the raft port between its draw and
		// this open: a one-node cluster moves to another port.
		cfg.RaftAddr, cfg.DataDir = freeAddr(t), t.TempDir()
		cfg.Peers = []cluster.Peer{{ID: cfg.ID, RaftAddr: cfg.RaftAddr}}
		node, err = cluster.Open(cfg, cluster.Hooks{})
	}
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	srv := New(node, zap.NewNop(), opts)
	go srv.Serve(lis)
	t.Cleanup(func() {
		srv.Stop(time.Second)
		_ = node.Shutdown()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ok, _ := node.Ready(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the node never became ready")
		}
	}
	conn, err := grpc.NewClient(cfg.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return node, srv, conn
}

func TestWatchSession_FromADroppedPositionIsOutOfRangeWithTheFirstKept(t *testing.T) {
	node, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := node.Propose(ctx, &fsmpb.Command{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_SetEventRetention{SetEventRetention: &fsmpb.SetEventRetention{
		Epoch: node.Epoch(), Retention: &fsmpb.EventRetention{Count: 3},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil {
		t.Fatalf("set retention: %v", res.Err)
	}
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "s1", Text: "hi", IdempotencyKey: fmt.Sprint("k", i)}); err != nil {
			t.Fatal(err)
		}
	}
	log := node.State().EventLog("s1")
	if log == nil || log.DroppedThrough == 0 || log.Count != 3 {
		t.Fatalf("event log %v; want 3 kept and some dropped", log)
	}

	stream, err := c.WatchSession(ctx, &dexv1.WatchSessionRequest{SessionId: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	st := status.Convert(err)
	if st.Code() != codes.OutOfRange {
		t.Fatalf("watch from 0: %v; want OutOfRange", err)
	}
	if want := fmt.Sprintf("the first kept is %d", log.FirstSeq); !strings.Contains(st.Message(), want) {
		t.Fatalf("message %q does not say %q", st.Message(), want)
	}
	var detail *dexv1.EventsNotKept
	for _, d := range st.Details() {
		if v, ok := d.(*dexv1.EventsNotKept); ok {
			detail = v
		}
	}
	if detail == nil || detail.FirstKeptSeq != log.FirstSeq || detail.ResumeAfterSeq != log.DroppedThrough || detail.SessionId != "s1" {
		t.Fatalf("detail %v; want first kept %d, resume after %d", detail, log.FirstSeq, log.DroppedThrough)
	}

	// From the resume position the watch delivers every kept event.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	stream, err = c.WatchSession(wctx, &dexv1.WatchSessionRequest{SessionId: "s1", AfterSeq: detail.ResumeAfterSeq})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && ev.Seq != log.FirstSeq {
			t.Fatalf("first event %d; want the first kept %d", ev.Seq, log.FirstSeq)
		}
	}
	wcancel()
	if _, err := stream.Recv(); err == nil || err == io.EOF {
		t.Fatalf("after cancel: %v", err)
	}

	// Bad input: no session id, an unknown session.
	for req, want := range map[*dexv1.WatchSessionRequest]codes.Code{
		{}:                  codes.InvalidArgument,
		{SessionId: "nope"}: codes.NotFound,
	} {
		stream, err := c.WatchSession(ctx, req)
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != want {
			t.Fatalf("watch %v: %v; want %s", req, err, want)
		}
	}
}

// The helper itself: a raft port another process took is not a failed test.
func TestServeNodeMovesOffATakenRaftPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := singleNodeConfig(t)
	cfg.RaftAddr = taken.Addr().String()
	cfg.Peers = []cluster.Peer{{ID: cfg.ID, RaftAddr: cfg.RaftAddr}}
	node, _, _ := serveNode(t, cfg, Options{})
	if ok, _ := node.Ready(); !ok {
		t.Fatal("the node opened on another raft port is not ready")
	}
}
