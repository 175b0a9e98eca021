package server

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// importObject streams obj to ImportSession in chunks of chunk bytes.
func importObject(ctx context.Context, c dexv1.SessionServiceClient, obj []byte, chunk int) (*dexv1.ImportSessionResponse, error) {
	stream, err := c.ImportSession(ctx)
	if err != nil {
		return nil, err
	}
	for len(obj) > 0 {
		n := min(chunk, len(obj))
		if err := stream.Send(&dexv1.ImportSessionRequest{Chunk: obj[:n]}); err != nil {
			break
		}
		obj = obj[n:]
	}
	return stream.CloseAndRecv()
}

// closedArchive is the archive object of a small closed session.
func closedArchive(t *testing.T, id string, historyCount uint64) []byte {
	t.Helper()
	obj, err := format.Encode(&dexv1.ArchivedSession{
		Session: &dexv1.Session{
			Id: id, Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED, NextStep: 1, NextTurn: 2, NextHistory: 2, NextInbox: 2,
			HistoryCount: historyCount, HistorySize: 5, CreatedAtMs: 1000, UpdatedAtMs: 2000, ClosedAtMs: 2000, CloseRequestedAtMs: 2000,
			RetentionMs: proto.Int64(time.Hour.Milliseconds()), DeleteAtMs: 2000 + time.Hour.Milliseconds(),
			History: []*dexv1.HistoryEntry{{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "hello", SessionId: id, MessageId: "m1", CumSize: 5, AtMs: 1000}},
		},
		LastEventSeq: 7,
		Events:       []*dexv1.Event{{Seq: 7, SessionId: id, Type: "session_closed", Ordinal: 3, AtMs: 2000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestImportSession_ASmallClosedSessionComesBack(t *testing.T) {
	node, _, conn := serveSingleNode(t, Options{})
	c := dexv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := importObject(ctx, c, closedArchive(t, "old", 1), 7)
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionId != "old" || resp.History != 1 || resp.Steps != 0 || resp.Events != 1 {
		t.Fatalf("answer %v", resp)
	}
	got, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "old"})
	if err != nil {
		t.Fatal(err)
	}
	s := got.Session
	if s.Status != dexv1.SessionStatus_SESSION_STATUS_CLOSED || s.ClosedAtMs != 2000 || s.UpdatedAtMs != 2000 || len(s.History) != 1 || got.LastEventSeq != 7 {
		t.Fatalf("imported session %v (last event %d)", s, got.LastEventSeq)
	}
	if s.DeleteAtMs < time.Now().Add(59*time.Minute).UnixMilli() {
		t.Fatalf("delete_at_ms %d: the retention counts from the import", s.DeleteAtMs)
	}
	// Its message ids are known: a repeat of one is a duplicate, as it
	// was before the close; a new message is refused by the closed session.
	if _, err := c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "old", IdempotencyKey: "m1", Text: "hello"}); err != nil {
		t.Fatalf("a repeat of an imported message: %v; want a duplicate's success", err)
	}
	if _, err := c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "old", IdempotencyKey: "m2", Text: "more"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a new message to the imported closed session: %v; want FailedPrecondition", err)
	}
	// Events emitted in this cluster come after the imported ones.
	if m := node.State().Meta(); m.NextEventSeq < 7 {
		t.Fatalf("next event seq %d; want at least the imported 7", m.NextEventSeq)
	}
}

// Content that the checksum vouches for but that does not add up is
// refused before anything is proposed: no session, hidden or not, is left.
func TestImportSession_RefusedBeforeAnythingIsProposed(t *testing.T) {
	node, _, conn := serveSingleNode(t, Options{})
	c := dexv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	applied := node.State().Meta().AppliedIndex
	for _, tc := range []struct {
		what  string
		obj   []byte
		chunk int
		code  codes.Code
		msg   string
	}{
		{"counts that do not add up", closedArchive(t, "old", 5), 1 << 20, codes.InvalidArgument, "session old counts 5 history entries"},
		{"a chunk over 1 MiB", make([]byte, MaxImportChunk+1), MaxImportChunk + 1, codes.InvalidArgument, "an import chunk is at most 1048576 bytes"},
		{"a foreign file", []byte("PK\x03\x04 a zip"), 1 << 20, codes.InvalidArgument, "not an importable archived session"},
	} {
		_, err := importObject(ctx, c, tc.obj, tc.chunk)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: %v; want %s %q", tc.what, err, tc.code, tc.msg)
		}
	}
	if got := node.State().Meta().AppliedIndex; got != applied {
		t.Fatalf("refused imports proposed %d commands", got-applied)
	}
	if c := node.State().Counts(); len(c.Sessions) != 0 {
		t.Fatalf("refused imports left sessions: %v", c.Sessions)
	}
}

// fakeImport is the server side of an ImportSession stream that sends
// chunks of n bytes until it has sent total.
type fakeImport struct {
	grpc.ServerStream
	ctx       context.Context
	n, total  int
	sent      int
	answerErr error
}

func (f *fakeImport) Context() context.Context { return f.ctx }

func (f *fakeImport) Recv() (*dexv1.ImportSessionRequest, error) {
	if f.sent >= f.total {
		return nil, io.EOF
	}
	f.sent += f.n
	return &dexv1.ImportSessionRequest{Chunk: make([]byte, f.n)}, nil
}

func (f *fakeImport) SendAndClose(*dexv1.ImportSessionResponse) error { return nil }

// An object over the limit is refused as soon as the chunk that passes it
// arrives, before it is read whole.
func TestImportSession_AnObjectOverTheLimitIsRefused(t *testing.T) {
	node, _, _ := serveSingleNode(t, Options{})
	s := NewSessions(node, LimitsFor(0))
	s.importLimit = 3 << 20
	stream := &fakeImport{ctx: context.Background(), n: MaxImportChunk, total: 10 * MaxImportChunk}
	err := s.ImportSession(stream)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "at most 3145728 bytes; this one is larger") {
		t.Fatalf("an object of 10 MiB against a limit of 3: %v", err)
	}
	if stream.sent != 4*MaxImportChunk {
		t.Fatalf("read %d bytes; want it refused at the chunk that passed the limit", stream.sent)
	}
}

// In a rolling upgrade, while a member runs a Dex that cannot apply the
// import's commands, an import is refused and nothing is proposed.
func TestImportSession_RefusedWhileAMemberCannotApplyIt(t *testing.T) {
	node, _, conn := serveSingleNode(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	self := proto.CloneOf(node.State().Nodes()[0])
	self.LogVersion = fsm.ImportLogVersion - 1
	if res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: self}}}); err != nil || res.Err != nil {
		t.Fatalf("record the node at an older log version: %v %v", err, res.Err)
	}
	applied := node.State().Meta().AppliedIndex
	_, err := importObject(ctx, dexv1.NewSessionServiceClient(conn), closedArchive(t, "old", 1), 1<<20)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "upgrade every node") {
		t.Fatalf("import with an older member: %v; want FailedPrecondition naming the upgrade", err)
	}
	if got := node.State().Meta().AppliedIndex; got != applied || node.State().Session("old") != nil {
		t.Fatalf("a refused import proposed %d commands", got-applied)
	}
}
