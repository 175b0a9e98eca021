package archive_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// moving answers GetSession with a session that changes on every read, or
// with an inbox larger than the page it shows.
type moving struct {
	dexv1.UnimplementedSessionServiceServer
	reads    atomic.Int64
	bigInbox bool
}

func (m *moving) GetSession(_ context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	n := m.reads.Add(1)
	s := &dexv1.Session{Id: req.SessionId, UpdatedAtMs: n, History: []*dexv1.HistoryEntry{{Seq: 1}}}
	if m.bigInbox {
		s.UpdatedAtMs, s.InboxCount, s.Inbox = 1, 3, []*dexv1.Message{{Seq: 1}}
	}
	return &dexv1.GetSessionResponse{Session: s, NextHistoryAfterSeq: 1}, nil
}

func serveFake(t *testing.T, svc dexv1.SessionServiceServer) *client.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	dexv1.RegisterSessionServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return client.New(conn)
}

// A session whose pages do not make one session (a turn ran meanwhile) is
// read again, and refused after three reads.
func TestFromAPI_ASessionThatKeepsChangingIsRefused(t *testing.T) {
	m := &moving{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := archive.FromAPI(ctx, serveFake(t, m), "s1")
	if !errors.Is(err, archive.ErrChanged) {
		t.Fatalf("FromAPI of a moving session: %v; want ErrChanged", err)
	}
	if n := m.reads.Load(); n != 6 {
		t.Fatalf("%d reads; want 3 tries of 2 pages", n)
	}
}

// An inbox larger than one GetSession answer cannot be read whole through
// the API: refused, not archived short.
func TestFromAPI_AnInboxLargerThanAPageIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := archive.FromAPI(ctx, serveFake(t, &moving{bigInbox: true}), "s1")
	if err == nil || !strings.Contains(err.Error(), "keeps 3 inbox messages") {
		t.Fatalf("FromAPI of a session with a long inbox: %v", err)
	}
}
