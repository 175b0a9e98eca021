package store

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// pagedEvent is one event as a page keeps it: its encoding without the
// session id (the page's), and the fields a page and the pager read.
type pagedEvent struct {
	sessionID    string
	seq, ordinal uint64
	body         []byte
}

// eventFromRecord reads the event a snapshot record of format 3 or later
// holds without decoding it into a message: the page keeps events encoded,
// so a restore copies each event's bytes, less its session id, where
// decoding and encoding it again took a third of a restore's time at 48,000
// events. It checks what the decoder would: every field's wire type and
// every string's UTF-8. ok is false for a record that is not one event
// alone; err is set for one that is and does not read. session is the
// previous event's session id, reused when the same.
func eventFromRecord(rec []byte, session string) (ev pagedEvent, ok bool, err error) {
	num, typ, n := protowire.ConsumeTag(rec)
	if n < 0 || num != eventRecord.Number() || typ != protowire.BytesType {
		return ev, false, nil
	}
	body, m := protowire.ConsumeBytes(rec[n:])
	if m < 0 || n+m != len(rec) {
		return ev, false, nil // the decoder says what is wrong
	}
	ev.body = make([]byte, 0, len(body))
	for b := body; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ev, true, fmt.Errorf("event: %v", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return ev, true, fmt.Errorf("event field %d: %v", num, protowire.ParseError(m))
		}
		field, value := b[:n+m], b[n:n+m]
		b = b[n+m:]
		switch num {
		case 1, 6, 7: // seq, at_ms, ordinal
			if typ != protowire.VarintType {
				return ev, true, fmt.Errorf("event field %d has wire type %d, want a varint", num, typ)
			}
			v, _ := protowire.ConsumeVarint(value)
			if num == 1 {
				ev.seq = v
			} else if num == 7 {
				ev.ordinal = v
			}
		case 2, 3, 4, 5: // session_id, type, step_id, detail
			if typ != protowire.BytesType {
				return ev, true, fmt.Errorf("event field %d has wire type %d, want bytes", num, typ)
			}
			s, _ := protowire.ConsumeBytes(value)
			if !utf8.Valid(s) {
				return ev, true, fmt.Errorf("event field %d holds invalid UTF-8", num)
			}
			if num == 2 {
				if !bytes.Equal(s, []byte(session)) {
					session = string(s)
				}
				ev.sessionID = session
				continue // the page's, not the event's
			}
		}
		ev.body = append(ev.body, field...)
	}
	return ev, true, nil
}

// pagedEventOf encodes a decoded event as a page keeps it.
func pagedEventOf(e *fsmpb.Event) pagedEvent {
	size := eventSize(e)
	b := appendEvent(make([]byte, 0, protowire.SizeBytes(size)), e, size)
	_, n := protowire.ConsumeVarint(b)
	return pagedEvent{sessionID: e.SessionId, seq: e.Seq, ordinal: e.Ordinal, body: b[n:]}
}

// pageOf is a page of one session's events, in order.
func pageOf(evs []pagedEvent) *EventPage {
	size := 0
	for _, e := range evs {
		size += protowire.SizeBytes(len(e.body))
	}
	data := make([]byte, 0, size)
	for _, e := range evs {
		data = protowire.AppendBytes(data, e.body)
	}
	last := evs[len(evs)-1]
	return &EventPage{SessionID: evs[0].sessionID, Key: evs[0].seq, n: len(evs), lastSeq: last.seq, lastOrdinal: last.ordinal, data: data}
}
