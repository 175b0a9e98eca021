package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Status carries the state's rows and bytes by table, as the answering node
// holds them, and the size of the snapshot it keeps once one is taken.
func TestStatus_CarriesTheStateSizeByTable(t *testing.T) {
	node, _, conn := serveSingleNode(t, Options{Dispatch: noTasks{}, Deadlines: noDeadlines{}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := dexv1.NewSessionServiceClient(conn).CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	admin := dexv1.NewAdminServiceClient(conn)
	st, err := admin.Status(ctx, &dexv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	size := st.StateSize
	if size == nil || size.AppliedIndex == 0 {
		t.Fatalf("state size %v; want figures at an applied index", size)
	}
	byTable := map[string]*dexv1.TableSize{}
	var rows, bytes uint64
	for _, ts := range size.Tables {
		byTable[ts.Table] = ts
		rows += ts.Rows
		bytes += ts.Bytes
	}
	if rows != size.TotalRows || bytes != size.TotalBytes {
		t.Fatalf("totals %d rows, %d bytes; the tables add up to %d, %d", size.TotalRows, size.TotalBytes, rows, bytes)
	}
	sess := node.State().Session("s")
	if got := byTable["sessions"]; got == nil || got.Rows != 1 || got.Bytes != uint64(proto.Size(sess)) {
		t.Fatalf("sessions table %v; want 1 row of %d bytes (the session's encoding)", got, proto.Size(sess))
	}
	if got := byTable["history"]; got == nil || got.Rows != 1 || got.Bytes == 0 {
		t.Fatalf("history table %v; want the first message", got)
	}
	if size.LastSnapshotBytes != 0 || size.LastSnapshotIndex != 0 {
		t.Fatalf("before any snapshot: %d bytes at %d; want none", size.LastSnapshotBytes, size.LastSnapshotIndex)
	}

	stream, err := admin.SaveSnapshot(ctx, &dexv1.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	st, err = admin.Status(ctx, &dexv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s := st.StateSize; s.LastSnapshotBytes == 0 || s.LastSnapshotIndex == 0 {
		t.Fatalf("after a snapshot: %d bytes at entry %d; want the snapshot's size and entry", s.LastSnapshotBytes, s.LastSnapshotIndex)
	}
}
