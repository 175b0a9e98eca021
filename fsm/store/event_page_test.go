package store

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func pageEventsOf(p *EventPage) []*fsmpb.Event {
	var out []*fsmpb.Event
	p.Each(func(ev *fsmpb.Event) bool { out = append(out, ev); return true })
	return out
}

func testEvent(seq uint64) *fsmpb.Event {
	return &fsmpb.Event{Seq: seq, SessionId: "sess-1", Type: "step_queued", StepId: fmt.Sprintf("sess-1-s%d", seq), Detail: "d", AtMs: 1700000000000 + int64(seq), Ordinal: seq}
}

func TestEventPage_KeepsEveryFieldAndNeverChangesAStoredPage(t *testing.T) {
	a, b, c := testEvent(10), testEvent(11), testEvent(12)
	p := NewEventPage("sess-1", a, b)
	if a.SessionId != "sess-1" {
		t.Fatalf("encoding changed the caller's event: session %q", a.SessionId)
	}
	q := p.WithEvent(c)
	got := pageEventsOf(q)
	want := []*fsmpb.Event{testEvent(10), testEvent(11), testEvent(12)}
	if len(got) != len(want) || q.Len() != 3 || q.Key != 10 || q.lastSeq != 12 || q.lastOrdinal != 12 {
		t.Fatalf("page after an append: %d events, len %d, key %d, last %d/%d; want 3 events keyed 10, last 12/12", len(got), q.Len(), q.Key, q.lastSeq, q.lastOrdinal)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("event %d = %v; want %v", i, got[i], want[i])
		}
	}
	if old := pageEventsOf(p); len(old) != 2 || p.Len() != 2 || p.lastSeq != 11 {
		t.Fatalf("the stored page changed: %d events, last %d; want 2, last 11", len(old), p.lastSeq)
	}

	r := q.WithoutFirst()
	if first := r.First(); !proto.Equal(first, testEvent(11)) || r.Len() != 2 || r.Key != 10 || r.lastSeq != 12 {
		t.Fatalf("without its first: first %v, len %d, key %d, last %d; want event 11, 2 events, key 10, last 12", first, r.Len(), r.Key, r.lastSeq)
	}
	if n := len(pageEventsOf(q)); n != 3 {
		t.Fatalf("dropping from a copy changed the stored page: %d events; want 3", n)
	}
}

func TestEventPager_SplitsBySessionAndPageSize(t *testing.T) {
	var evs []*fsmpb.Event
	for i := range EventPageSize + 2 {
		evs = append(evs, &fsmpb.Event{Seq: uint64(100 + i), SessionId: "a", Ordinal: uint64(i + 1)})
	}
	evs = append(evs, &fsmpb.Event{Seq: 5, SessionId: "b", Ordinal: 1})
	tx := New(Routing{}).Txn(true)
	pager := &eventPager{tx: tx}
	for _, ev := range evs {
		if err := pager.add(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := pager.flush(); err != nil {
		t.Fatal(err)
	}
	pages := All[*EventPage](tx, TableEvents, IndexID)
	if len(pages) != 3 {
		t.Fatalf("%d pages; want 3 (a full page of a, the rest of a, b)", len(pages))
	}
	for i, want := range []struct {
		session   string
		key, last uint64
		n         int
	}{{"a", 100, 115, EventPageSize}, {"a", 116, 117, 2}, {"b", 5, 5, 1}} {
		p := pages[i]
		if p.SessionID != want.session || p.Key != want.key || p.lastSeq != want.last || p.Len() != want.n {
			t.Fatalf("page %d = %s key %d last %d len %d; want %+v", i, p.SessionID, p.Key, p.lastSeq, p.Len(), want)
		}
		for _, ev := range pageEventsOf(p) {
			if ev.SessionId != want.session {
				t.Fatalf("page %d decodes an event of session %q; want %q", i, ev.SessionId, want.session)
			}
		}
	}
}

func TestEventPage_SnapshotRecordsAreWhatProtodelimWrites(t *testing.T) {
	big := testEvent(10)
	big.Detail = strings.Repeat("é", 200)
	evs := []*fsmpb.Event{testEvent(7), testEvent(8), {Seq: 9, SessionId: "sess-1", Type: "x", Ordinal: 3},
		big, {Seq: 11, SessionId: "sess-1", AtMs: -1}, {SessionId: "sess-1"}}
	p := NewEventPage("sess-1", evs...)
	var got, want bytes.Buffer
	if err := p.EachEncoded(func(ev []byte) error { return writeEventRecord(&got, ev) }); err != nil {
		t.Fatal(err)
	}
	opts := protodelim.MarshalOptions{MarshalOptions: proto.MarshalOptions{Deterministic: true}}
	for _, ev := range evs {
		if _, err := opts.MarshalTo(&want, &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Event{Event: ev}}); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("records written from the page differ from protodelim's:\n got %x\nwant %x", got.Bytes(), want.Bytes())
	}
}

func TestEventPage_RefusesAnEventWithInvalidUTF8(t *testing.T) {
	bad := testEvent(1)
	bad.Detail = "cut in the middle of \xc3"
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "invalid UTF-8") {
			t.Fatalf("an event with invalid UTF-8 was paged (recovered %v)", r)
		}
	}()
	NewEventPage("sess-1", bad)
}

func TestEventPage_AnEventOf128BytesOrMoreKeepsItsLength(t *testing.T) {
	big := testEvent(2)
	big.Detail = string(bytes.Repeat([]byte("x"), 300))
	p := NewEventPage("sess-1", testEvent(1), big, testEvent(3))
	got := pageEventsOf(p)
	if len(got) != 3 || !proto.Equal(got[1], big) || !proto.Equal(got[2], testEvent(3)) {
		t.Fatalf("page with a 300-byte detail decodes as %v", got)
	}
}

func TestEventPage_HoldsNoSpareBytes(t *testing.T) {
	var evs []*fsmpb.Event
	for i := range EventPageSize {
		evs = append(evs, testEvent(uint64(i+1)))
	}
	p := NewEventPage("sess-1", evs...)
	if cap(p.data) != len(p.data) {
		t.Fatalf("a page of %d events holds %d bytes in a buffer of %d", len(evs), len(p.data), cap(p.data))
	}
	if q := p.WithEvent(testEvent(99)); cap(q.data) != len(q.data) {
		t.Fatalf("an appended page holds %d bytes in a buffer of %d", len(q.data), cap(q.data))
	}
}
