package store

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// sizeOf returns the size the store reports for one table.
func sizeOf(t *testing.T, tx *Txn, table string) TableSize {
	t.Helper()
	for _, s := range tx.TableSizes() {
		if s.Table == table {
			return s
		}
	}
	t.Fatalf("no size for table %s", table)
	return TableSize{}
}

// Inserting, replacing and deleting rows keeps a table's figures equal to
// its rows' count and the sum of their encodings (proto.Size, measured here
// apart from the store's own measure).
func TestTableSizes_InsertUpdateDeleteKeepTheSumOfEncodings(t *testing.T) {
	db := New(Routing{})
	a := &fsmpb.Session{Id: "a", Agent: "writer"}
	b := &fsmpb.Session{Id: "b"}
	a2 := &fsmpb.Session{Id: "a", Agent: "a much longer agent name than before", NextStep: 1 << 40}

	tx := db.Txn(true)
	tx.Put(TableSessions, a)
	tx.Put(TableSessions, b)
	tx.Commit()
	want := TableSize{Table: TableSessions, Rows: 2, Bytes: int64(proto.Size(a) + proto.Size(b))}
	if got := sizeOf(t, db.Txn(false), TableSessions); got != want {
		t.Fatalf("after two inserts %+v; want %+v", got, want)
	}

	tx = db.Txn(true)
	tx.Put(TableSessions, a2)
	tx.Commit()
	want.Bytes = int64(proto.Size(a2) + proto.Size(b))
	if got := sizeOf(t, db.Txn(false), TableSessions); got != want {
		t.Fatalf("after replacing a %+v; want %+v", got, want)
	}

	tx = db.Txn(true)
	tx.Remove(TableSessions, b)
	tx.Commit()
	want = TableSize{Table: TableSessions, Rows: 1, Bytes: int64(proto.Size(a2))}
	if got := sizeOf(t, db.Txn(false), TableSessions); got != want {
		t.Fatalf("after deleting b %+v; want %+v", got, want)
	}

	// An aborted transaction changes nothing.
	tx = db.Txn(true)
	tx.Remove(TableSessions, a2)
	tx.Abort()
	if got := sizeOf(t, db.Txn(false), TableSessions); got != want {
		t.Fatalf("after an aborted delete %+v; want %+v", got, want)
	}
	for _, s := range db.Txn(false).TableSizes() {
		if s.Table != TableSessions && s != (TableSize{Table: s.Table}) {
			t.Fatalf("table %s has %+v without a row written", s.Table, s)
		}
	}
}

// An event page counts its events, and its bytes are each event's encoding
// without the session id, behind its length: however the events are paged.
func TestTableSizes_EventPagesCountTheirEvents(t *testing.T) {
	var evs []*fsmpb.Event
	var wantBytes int64
	for i := range EventPageSize + 3 {
		ev := &fsmpb.Event{Seq: uint64(i + 1), SessionId: "s", Ordinal: uint64(i + 1), Type: "delta"}
		evs = append(evs, ev)
		noID := proto.Clone(ev).(*fsmpb.Event)
		noID.SessionId = ""
		wantBytes += int64(protowire.SizeBytes(proto.Size(noID)))
	}
	db := New(Routing{})
	tx := db.Txn(true)
	tx.Put(TableEvents, NewEventPage("s", evs[:EventPageSize]...))
	tx.Put(TableEvents, NewEventPage("s", evs[EventPageSize:]...))
	tx.Commit()
	want := TableSize{Table: TableEvents, Rows: int64(len(evs)), Bytes: wantBytes}
	if got := sizeOf(t, db.Txn(false), TableEvents); got != want {
		t.Fatalf("two pages: %+v; want %+v", got, want)
	}

	// Dropping the first event of a page takes off its share alone.
	tx = db.Txn(true)
	first := tx.PageAtOrBefore("s", 1)
	tx.Put(TableEvents, first.WithoutFirst())
	tx.Commit()
	noID := proto.Clone(evs[0]).(*fsmpb.Event)
	noID.SessionId = ""
	want.Rows--
	want.Bytes -= int64(protowire.SizeBytes(proto.Size(noID)))
	if got := sizeOf(t, db.Txn(false), TableEvents); got != want {
		t.Fatalf("after dropping an event: %+v; want %+v", got, want)
	}
}

// A store loaded from a snapshot reports the figures of the store the
// snapshot was taken from, table by table.
func TestTableSizes_RestoreGivesTheSameFigures(t *testing.T) {
	db := New(Routing{})
	tx := db.Txn(true)
	tx.Put(TableMeta, &fsmpb.ClusterMeta{Id: MetaID, AppliedIndex: 42, Epoch: 3})
	tx.Put(TableSessions, &fsmpb.Session{Id: "s", Agent: "a", NextStep: 9})
	for seq := uint64(1); seq <= 3; seq++ {
		tx.Put(TableHistory, &fsmpb.HistoryEntry{SessionId: "s", Seq: seq, Text: "hello"})
	}
	var evs []*fsmpb.Event
	for i := range 20 {
		evs = append(evs, &fsmpb.Event{Seq: uint64(i + 1), SessionId: "s", Ordinal: uint64(i + 1)})
	}
	// Pages of 5 and 15: a snapshot restores them as 16 and 4.
	tx.Put(TableEvents, NewEventPage("s", evs[:5]...))
	tx.Put(TableEvents, NewEventPage("s", evs[5:]...))
	tx.Put(TableEventLogs, &fsmpb.EventLog{SessionId: "s"})
	tx.Commit()

	var snap bytes.Buffer
	if err := Persist(&snap, db.Txn(false)); err != nil {
		t.Fatal(err)
	}
	restored, err := Load(&snap, Routing{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, got := db.Txn(false).TableSizes(), restored.Txn(false).TableSizes()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("restored %+v; the original had %+v", got[i], want[i])
		}
	}
	if s := sizeOf(t, restored.Txn(false), TableHistory); s.Rows != 3 || s.Bytes == 0 {
		t.Fatalf("restored history %+v; want 3 rows of some bytes", s)
	}
}
