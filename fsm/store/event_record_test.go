package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// recordsOf is the snapshot records a page's events are written as.
func recordsOf(t *testing.T, p *EventPage) [][]byte {
	t.Helper()
	var recs [][]byte
	if err := p.EachEncoded(func(ev []byte) error {
		var b bytes.Buffer
		if err := writeEventRecord(&b, ev); err != nil {
			return err
		}
		rec := b.Bytes()
		_, n := protowire.ConsumeVarint(rec) // the record's length
		recs = append(recs, rec[n:])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// A restore pages the events of a snapshot from their bytes: the pages are
// byte for byte those the decoded events made.
func TestEventFromRecord_PagesWhatTheDecodedEventsPaged(t *testing.T) {
	evs := []*fsmpb.Event{
		{Seq: 7, SessionId: "sess-1", Type: "step_queued", StepId: "s1", Detail: "", AtMs: 1700000000123, Ordinal: 3},
		{Seq: 8, SessionId: "sess-1"}, // every other field empty
		{Seq: 9, SessionId: "sess-1", Type: "turn_completed", Detail: "héllo, 世界 " + strings.Repeat("d", 200), AtMs: -5, Ordinal: 1 << 40},
		{Seq: 1 << 50, SessionId: "sess-1", StepId: "ünïcode", Ordinal: 4},
	}
	want := NewEventPage("sess-1", evs...)
	var got []pagedEvent
	session := ""
	for i, rec := range recordsOf(t, want) {
		ev, ok, err := eventFromRecord(rec, session)
		if !ok || err != nil {
			t.Fatalf("event %d: ok %v, %v", i, ok, err)
		}
		if ev.sessionID != "sess-1" || ev.seq != evs[i].Seq || ev.ordinal != evs[i].Ordinal {
			t.Fatalf("event %d read as session %q seq %d ordinal %d", i, ev.sessionID, ev.seq, ev.ordinal)
		}
		session = ev.sessionID
		got = append(got, ev)
	}
	p := pageOf(got)
	if p.SessionID != want.SessionID || p.Key != want.Key || p.Len() != want.Len() || p.LastSeq() != want.LastSeq() ||
		p.LastOrdinal() != want.LastOrdinal() || !bytes.Equal(p.data, want.data) {
		t.Fatalf("page from the records differs from the page of the decoded events:\n got %+v\nwant %+v", p, want)
	}
}

// What the decoder refuses in an event, the restore refuses too, naming
// the record; a record holding something else is left to the decoder.
func TestEventFromRecord_RefusesWhatTheDecoderRefuses(t *testing.T) {
	event := func(fields ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, eventRecord.Number(), protowire.BytesType), bytes.Join(fields, nil))
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	for _, c := range []struct {
		name, want string
		rec        []byte
	}{
		{"seq as bytes", "field 1 has wire type 2", event(str(1, "x"))},
		{"type as a varint", "field 3 has wire type 0", event(varint(1, 1), varint(3, 7))},
		{"detail not UTF-8", "field 5 holds invalid UTF-8", event(varint(1, 1), str(2, "a"), str(5, "ok\xffno"))},
		{"session id not UTF-8", "field 2 holds invalid UTF-8", event(varint(1, 1), str(2, "\xc3"))},
		{"a field cut short", "event field 4", event(varint(1, 1), str(4, "abcdef")[:4])},
	} {
		t.Run(c.name, func(t *testing.T) {
			decodeErr := (&fsmpb.SnapshotRecord{}).UnmarshalVT(c.rec)
			_, ok, err := eventFromRecord(c.rec, "")
			if !ok || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("eventFromRecord = ok %v, %v; want %q (the decoder says %v)", ok, err, c.want, decodeErr)
			}
			var snap bytes.Buffer
			snap.WriteString(SnapshotMagic)
			snap.WriteByte(SnapshotVersion)
			snap.Write(protowire.AppendBytes(nil, c.rec))
			if _, err := Load(&snap, Routing{}, nil); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "record 0") {
				t.Fatalf("Load = %v; want ErrBadSnapshot naming record 0", err)
			}
		})
	}
	meta, err := (&fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Meta{Meta: &fsmpb.ClusterMeta{ClusterId: "c"}}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := eventFromRecord(meta, ""); ok || err != nil {
		t.Fatalf("a meta record read as an event: ok %v, %v", ok, err)
	}
}
