package store

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// EventPageSize bounds the events of one page: what one emit copies.
const EventPageSize = 16

// EventPage is up to EventPageSize consecutive events of one session. Its key
// is the seq of the event it was started with: every event in it has a seq
// of at least the key and below the next page's key (dropping events from
// its front keeps the key). A stored page never changes: a write stores a
// new one.
//
// The events are kept encoded, each length-delimited and without its
// session id (the page's): a kept event costs its bytes, not a message with
// its own strings for the collector to scan, and a reader decodes the events
// it reads. The newest event's seq and ordinal are kept beside, for the
// emits and counts that need only those.
type EventPage struct {
	SessionID   string
	Key         uint64
	n           int
	lastSeq     uint64
	lastOrdinal uint64
	data        []byte
}

// NewEventPage returns a page of session's events, keyed by the first one's
// seq. The events are the caller's and are not kept.
func NewEventPage(sessionID string, evs ...*fsmpb.Event) *EventPage {
	p := &EventPage{SessionID: sessionID, Key: evs[0].Seq}
	size := 0
	for _, ev := range evs {
		size += protowire.SizeBytes(eventSize(ev))
	}
	p.data = make([]byte, 0, size) // exactly: a stored page is never appended to
	for _, ev := range evs {
		p.data = appendEvent(p.data, ev, eventSize(ev))
	}
	p.n = len(evs)
	last := evs[len(evs)-1]
	p.lastSeq, p.lastOrdinal = last.Seq, last.Ordinal
	return p
}

// Len is how many events the page holds.
func (p *EventPage) Len() int { return p.n }

// LastSeq and LastOrdinal are the seq and ordinal of the page's newest event.
func (p *EventPage) LastSeq() uint64     { return p.lastSeq }
func (p *EventPage) LastOrdinal() uint64 { return p.lastOrdinal }

// withEvent returns a copy of p with ev after its events.
func (p *EventPage) WithEvent(ev *fsmpb.Event) *EventPage {
	size := eventSize(ev)
	data := make([]byte, len(p.data), len(p.data)+protowire.SizeBytes(size))
	copy(data, p.data)
	return &EventPage{
		SessionID: p.SessionID, Key: p.Key, n: p.n + 1,
		lastSeq: ev.Seq, lastOrdinal: ev.Ordinal, data: appendEvent(data, ev, size),
	}
}

// withoutFirst returns a copy of p without its first event; p must have more
// than one.
func (p *EventPage) WithoutFirst() *EventPage {
	_, n := protowire.ConsumeBytes(p.data)
	return &EventPage{
		SessionID: p.SessionID, Key: p.Key, n: p.n - 1,
		lastSeq: p.lastSeq, lastOrdinal: p.lastOrdinal, data: p.data[n:],
	}
}

// first decodes the page's first event.
func (p *EventPage) First() *fsmpb.Event {
	var out *fsmpb.Event
	p.Each(func(ev *fsmpb.Event) bool { out = ev; return false })
	return out
}

// each decodes the page's events in order and calls fn with each until fn
// returns false. The events are fresh: the caller may keep them.
func (p *EventPage) Each(fn func(*fsmpb.Event) bool) {
	data := p.data
	for len(data) > 0 {
		b, n := protowire.ConsumeBytes(data)
		if n < 0 {
			panic(fmt.Sprintf("store: event page of %s does not decode: %v", p.SessionID, protowire.ParseError(n)))
		}
		ev := &fsmpb.Event{}
		if err := ev.UnmarshalVT(b); err != nil {
			panic(fmt.Sprintf("store: event of %s does not decode: %v", p.SessionID, err))
		}
		ev.SessionId = p.SessionID
		if !fn(ev) {
			return
		}
		data = data[n:]
	}
}

// eventSize is the encoded size of ev without its session id.
func eventSize(ev *fsmpb.Event) int {
	return ev.SizeVT() - sessionIDSize(ev)
}

func sessionIDSize(ev *fsmpb.Event) int {
	if ev.SessionId == "" {
		return 0
	}
	return protowire.SizeTag(2) + protowire.SizeBytes(len(ev.SessionId))
}

// appendEvent appends ev, length-delimited and without its session id, to b;
// size is eventSize(ev), which the caller sized b with. ev is encoded once
// into exactly its bytes by the generated encoder, which writes what the deterministic reflective one does (fields in
// number order; an event has no map). The generated encoder does not check
// strings; this does, as the reflective one did.
func appendEvent(b []byte, ev *fsmpb.Event, size int) []byte {
	if !utf8.ValidString(ev.Type) || !utf8.ValidString(ev.StepId) || !utf8.ValidString(ev.Detail) {
		panic(fmt.Sprintf("store: encode event %d of %s: a string field holds invalid UTF-8", ev.Seq, ev.SessionId))
	}
	sessionID := ev.SessionId
	ev.SessionId = "" // restored below; ev is not shared yet
	defer func() { ev.SessionId = sessionID }()
	b = protowire.AppendVarint(b, uint64(size))
	at := len(b)
	b = slices.Grow(b, size)[:at+size]
	if _, err := ev.MarshalToSizedBufferVT(b[at:]); err != nil {
		panic(fmt.Sprintf("store: encode event: %v", err))
	}
	return b
}

// eachEncoded calls fn with each event's encoding as a deterministic
// proto.Marshal of the whole event writes it (session id included), until fn
// returns an error; the bytes are valid only during the call. A snapshot
// writes them without decoding a message.
func (p *EventPage) EachEncoded(fn func([]byte) error) error {
	var buf []byte
	data := p.data
	for len(data) > 0 {
		enc, n := protowire.ConsumeBytes(data)
		if n < 0 {
			panic(fmt.Sprintf("store: event page of %s does not decode: %v", p.SessionID, protowire.ParseError(n)))
		}
		data = data[n:]
		// The session id (field 2) goes after the seq (field 1), when there
		// is one, as a deterministic encoding orders fields by number.
		split := 0
		if num, typ, tn := protowire.ConsumeTag(enc); tn > 0 && num == 1 {
			split = tn + protowire.ConsumeFieldValue(num, typ, enc[tn:])
		}
		buf = append(buf[:0], enc[:split]...)
		if p.SessionID != "" {
			buf = protowire.AppendTag(buf, 2, protowire.BytesType)
			buf = protowire.AppendString(buf, p.SessionID)
		}
		buf = append(buf, enc[split:]...)
		if err := fn(buf); err != nil {
			return err
		}
	}
	return nil
}
