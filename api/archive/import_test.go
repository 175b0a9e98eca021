package archive_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/archive/archivetest"
	"github.com/dexhq/dex/api/archive/format"
	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A closed session exported from one cluster and imported into another
// exports there to the same bytes, but for its deletion time, which counts
// from the import: through the state and through the API alike.
func TestImport_ExportImportExportGivesTheSameBytes(t *testing.T) {
	src := archivetest.Start(t)
	src.Busy("s1", 3)
	src.Close("s1")
	exportImportExport(t, src)
}

// A session whose older turns folded comes back with its folded turns.
func TestImport_ASessionWithFoldedTurnsComesBackWhole(t *testing.T) {
	src := archivetest.Start(t)
	src.Busy("s1", 6)
	src.Fold(2)
	src.Close("s1")
	want := exportImportExport(t, src)
	if len(want.FoldedTurns) != 4 || want.Session.FoldedSteps != 12 {
		t.Fatalf("the session exported %d folded turns of %d Steps; want 4 of 12", len(want.FoldedTurns), want.Session.FoldedSteps)
	}
}

// exportImportExport exports session s1 of src, imports it into a new
// cluster and checks it exports there to the same bytes but for its
// deletion time; it returns the session as src exported it.
func exportImportExport(t *testing.T, src *archivetest.Cluster) *dexv1.ArchivedSession {
	t.Helper()
	dst := archivetest.Start(t)
	obj, err := archive.FromState(src.Node.State(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := time.Now().UnixMilli()
	resp, err := client.New(dst.Conn).ImportSession(ctx, bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	want, err := format.Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionId != "s1" || resp.History != uint64(len(want.Session.History)) || resp.Steps != uint64(len(want.Steps)) ||
		resp.Events != uint64(len(want.Events)) || resp.FoldedTurns != uint64(len(want.FoldedTurns)) {
		t.Fatalf("the import answered %v; want s1 with %d history entries, %d Steps, %d folded turns, %d events",
			resp, len(want.Session.History), len(want.Steps), len(want.FoldedTurns), len(want.Events))
	}

	fromState, err := archive.FromState(dst.Node.State(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	fromAPI, err := archive.FromAPI(ctx, client.New(dst.Conn), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromState, fromAPI) {
		t.Fatal("the imported session reads differently from the state and through the API")
	}
	got, err := format.Decode(fromState)
	if err != nil {
		t.Fatal(err)
	}
	deleteAt := got.Session.DeleteAtMs
	if deleteAt < before+time.Hour.Milliseconds() || deleteAt == want.Session.DeleteAtMs {
		t.Fatalf("delete_at_ms %d; want the import's time (after %d) plus the hour of retention", deleteAt, before)
	}
	got.Session.DeleteAtMs = want.Session.DeleteAtMs
	again, err := format.Encode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, obj) {
		t.Fatalf("export, import, export: %d bytes differ from the %d exported, beyond delete_at_ms", len(again), len(obj))
	}
	if len(want.Session.History) < 10 || len(want.Steps) < 7 || want.Events[0].Ordinal == 1 {
		t.Fatalf("the session is too plain for this test: %d history entries, %d Steps, first event ordinal %d", len(want.Session.History), len(want.Steps), want.Events[0].Ordinal)
	}
	return want
}

// An id the cluster holds, a session that was in a turn and a damaged
// object are refused, and change nothing.
func TestImport_RefusalsChangeNothing(t *testing.T) {
	src, dst := archivetest.Start(t), archivetest.Start(t)
	src.Idle("idle")
	src.Busy("busy", 1)
	dst.Idle("idle")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(dst.Conn)
	held, _ := archive.FromState(dst.Node.State(), "idle")

	idle, _ := archive.FromState(src.Node.State(), "idle")
	busy, _ := archive.FromState(src.Node.State(), "busy")
	damaged := append([]byte{}, idle...)
	damaged[len(damaged)/2] ^= 1
	for _, tc := range []struct {
		what string
		obj  []byte
		code codes.Code
		msg  string
	}{
		{"an id the cluster holds", idle, codes.AlreadyExists, `session "idle" already exists`},
		{"a session in a turn", busy, codes.FailedPrecondition, "session busy was running when it was archived"},
		{"a damaged object", damaged, codes.InvalidArgument, "its SHA-256 does not match"},
		{"a foreign file", []byte("hello\n"), codes.InvalidArgument, "not a Dex archived session"},
		{"nothing", nil, codes.InvalidArgument, "the import sent no bytes"},
	} {
		_, err := c.ImportSession(ctx, bytes.NewReader(tc.obj))
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: %v; want %s %q", tc.what, err, tc.code, tc.msg)
		}
	}
	list, err := dexv1.NewSessionServiceClient(dst.Conn).ListSessions(ctx, &dexv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 {
		t.Fatalf("after the refusals the cluster lists %v (%v); want its one session", list.GetSessions(), err)
	}
	if now, _ := archive.FromState(dst.Node.State(), "idle"); !bytes.Equal(now, held) {
		t.Fatal("a refused import changed the session of its id")
	}
	if c := dst.Node.State().Counts(); c.Sessions["importing"] != 0 || c.Sessions["deleted"] != 0 {
		t.Fatalf("a refused import left rows: %v", c.Sessions)
	}
}
