package store

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// SnapshotMagic opens every snapshot; the byte after it is the format
// version. Version 2 keeps history, inbox and accepted message ids as
// records of their own; version 1 carried them inside each session. Version
// 3 numbers each session's events (ordinals) and keeps in the EventLog only
// where they begin. Versions 1 and 2 still restore.
const (
	SnapshotMagic     = "DEXSNAP"
	SnapshotVersion   = 3
	SnapshotVersionV1 = 1
)

// ErrBadSnapshot is returned for a snapshot that is not Dex's or is damaged.
var ErrBadSnapshot = errors.New("not a Dex state snapshot, or a damaged one")

// Persist writes the state tx reads: a header, then one length-delimited
// record per row, tables in the order of stateTables and rows in index
// order, so two equal states write equal bytes.
func Persist(w io.Writer, tx *Txn) error {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(SnapshotMagic); err != nil {
		return err
	}
	if err := bw.WriteByte(SnapshotVersion); err != nil {
		return err
	}
	sw := &snapshotWriter{w: bw}
	for i := range registry {
		t := &registry[i]
		var err error
		if t.persist != nil {
			err = t.persist(sw, t, tx)
		} else {
			err = sw.rows(t, tx)
		}
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// persistMeta writes the meta record, a state that has none yet too.
func persistMeta(w *snapshotWriter, t *stateTable, tx *Txn) error {
	return w.row(t, tx.Meta())
}

// persistEvents writes the events of the stored pages one record each.
func persistEvents(w *snapshotWriter, t *stateTable, tx *Txn) error {
	it, err := tx.get(t.name, IndexID)
	if err != nil {
		return err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if err := raw.(*EventPage).EachEncoded(func(ev []byte) error { return writeEventRecord(w.w, ev) }); err != nil {
			return err
		}
	}
	return nil
}

// eventRecord is the field of SnapshotRecord an event travels in.
var eventRecord = snapshotRecord.Fields().ByName("event")

// writeEventRecord writes the snapshot record of one encoded event: the
// bytes protodelim writes for a SnapshotRecord holding that event.
func writeEventRecord(w io.Writer, ev []byte) error {
	return writeRecord(w, eventRecord.Number(), ev)
}

// restoring is a Restore under way.
type restoring struct {
	tx      *Txn
	version byte
	pager   *eventPager
	// legacyEvents are the events of a snapshot older than format 3, paged
	// once all are read.
	legacyEvents []*fsmpb.Event
}

// Load reads a snapshot into a new store whose rule-keyed indexes follow r.
// finish runs in the store's write transaction once every record is in and
// upgraded, for what the rules derive from the rows (nil for nothing).
func Load(in io.Reader, r Routing, finish func(*Txn)) (*DB, error) {
	sr, err := NewSnapshotReader(in)
	if err != nil {
		return nil, err
	}
	next := New(r)
	tx := next.Txn(true)
	defer tx.Abort()
	rs := &restoring{tx: tx, version: sr.version, pager: &eventPager{tx: tx}}
	done := make(chan struct{})
	batches := decodeAhead(sr, done)
	defer func() {
		// The decoder stops before Load returns: in is the caller's again.
		close(done)
		for range batches {
		}
	}()
	n := 0
	for batch := range batches {
		for _, rec := range batch.recs {
			t := tableOf(rec)
			if t == nil {
				return nil, fmt.Errorf("%w: record %d has an unknown type", ErrBadSnapshot, n)
			}
			row := t.row(rec)
			if t.restore != nil {
				err = t.restore(rs, row)
			} else {
				err = tx.insert(t.name, row)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: record %d: %v", ErrBadSnapshot, n, err)
			}
			n++
		}
		if batch.err != nil {
			return nil, batch.err
		}
	}
	if err := rs.pager.flush(); err != nil {
		return nil, fmt.Errorf("%w: events: %v", ErrBadSnapshot, err)
	}
	if rs.version < 3 {
		events := rs.legacyEvents
		sortEvents(events)
		if err := upgradeEvents(tx, events); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		for _, ev := range events {
			if err := rs.pager.add(ev); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
			}
		}
		if err := rs.pager.flush(); err != nil {
			return nil, fmt.Errorf("%w: events: %v", ErrBadSnapshot, err)
		}
	}
	if finish != nil {
		finish(tx)
	}
	tx.Commit()
	return next, nil
}

// decodedBatch is records decoded ahead of the restore, in snapshot order;
// err, if any, is the decoder's error after them.
type decodedBatch struct {
	recs []*fsmpb.SnapshotRecord
	err  error
}

// decodeBatch is how many records travel together to the restore.
const decodeBatch = 256

// decodeAhead decodes sr's records on a goroutine of its own, so that a
// restore decodes the next records while it inserts these: on two cores or
// more, it takes about the longer of the two instead of their sum. The
// channel closes after the last record or the first error; closing done
// stops the decoder early.
func decodeAhead(sr *SnapshotReader, done <-chan struct{}) <-chan decodedBatch {
	out := make(chan decodedBatch, 4)
	go func() {
		defer close(out)
		send := func(b decodedBatch) bool {
			select {
			case out <- b:
				return true
			case <-done:
				return false
			}
		}
		recs := make([]*fsmpb.SnapshotRecord, 0, decodeBatch)
		for {
			rec, err := sr.Next()
			if errors.Is(err, io.EOF) {
				send(decodedBatch{recs: recs})
				return
			}
			if err != nil {
				send(decodedBatch{recs: recs, err: err})
				return
			}
			recs = append(recs, rec)
			select {
			case <-done:
				return
			default:
			}
			if len(recs) == decodeBatch {
				if !send(decodedBatch{recs: recs}) {
					return
				}
				recs = make([]*fsmpb.SnapshotRecord, 0, decodeBatch)
			}
		}
	}()
	return out
}

// restoreSession inserts a session; one of format 1 first gives its inline
// history, inbox and accepted message ids rows of their own.
func restoreSession(r *restoring, row proto.Message) error {
	s := row.(*fsmpb.Session)
	if r.version == SnapshotVersionV1 {
		if err := splitV1Session(r.tx, s); err != nil {
			return err
		}
	}
	return r.tx.insert(TableSessions, s)
}

// restoreEvent pages an event; those of a format older than 3 are paged
// once all are read, in order.
func restoreEvent(r *restoring, row proto.Message) error {
	ev := row.(*fsmpb.Event)
	if r.version < 3 {
		r.legacyEvents = append(r.legacyEvents, ev)
		return nil
	}
	return r.pager.add(ev)
}

// splitV1Session moves the history, inbox and accepted message ids a format-1
// session carried inline into their rows and fills in the running figures.
func splitV1Session(tx *Txn, s *fsmpb.Session) error {
	for _, e := range s.History {
		e.SessionId = s.Id
		s.HistorySize += EntrySize(e)
		e.CumSize = s.HistorySize
		if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
			s.LatestSummarySeq = e.Seq
		}
		if err := tx.insert(TableHistory, e); err != nil {
			return err
		}
	}
	s.HistoryCount = uint64(len(s.History))
	s.NextInbox = 1
	for _, row := range s.Inbox {
		row.SessionId, row.Seq = s.Id, s.NextInbox
		s.NextInbox++
		if err := tx.insert(TableInbox, row); err != nil {
			return err
		}
	}
	s.InboxCount = uint32(len(s.Inbox))
	for _, id := range s.SeenMessageIds {
		if err := tx.insert(TableAccepted, &fsmpb.AcceptedMessage{SessionId: s.Id, MessageId: id}); err != nil {
			return err
		}
	}
	s.History, s.Inbox, s.SeenMessageIds = nil, nil, nil
	return nil
}

// upgradeEvents brings the events of a snapshot written before version 3 to
// this layout: ordinals numbered per session in seq order, and every session
// with events given an EventLog that starts at its first (a version 1
// snapshot had none; a version 2 one counted every event in its row). evs
// are sorted by sortEvents and fresh from the snapshot; one listed twice is
// refused when they are paged.
func upgradeEvents(tx *Txn, evs []*fsmpb.Event) error {
	var logs []*fsmpb.EventLog
	var cur *fsmpb.EventLog
	var ord uint64
	for _, ev := range evs {
		if cur == nil || cur.SessionId != ev.SessionId {
			cur = &fsmpb.EventLog{SessionId: ev.SessionId, FirstSeq: ev.Seq, FirstOrdinal: 1, FirstAtMs: ev.AtMs}
			if have := tx.EventLog(ev.SessionId); have != nil {
				cur.DroppedThrough = have.DroppedThrough
			}
			logs = append(logs, cur)
			ord = 0
		}
		ord++
		ev.Ordinal = ord
	}
	for _, l := range logs {
		if err := tx.insert(TableEventLogs, l); err != nil {
			return err
		}
	}
	// Logs of sessions that keep no event keep only what was dropped.
	var empty []*fsmpb.EventLog
	lit, err := tx.get(TableEventLogs, IndexID)
	if err != nil {
		return err
	}
	for raw := lit.Next(); raw != nil; raw = lit.Next() {
		if l := raw.(*fsmpb.EventLog); l.Count != 0 || l.LastSeq != 0 {
			empty = append(empty, &fsmpb.EventLog{SessionId: l.SessionId, DroppedThrough: l.DroppedThrough})
		}
	}
	for _, l := range empty {
		if err := tx.insert(TableEventLogs, l); err != nil {
			return err
		}
	}
	return nil
}

// sortEvents puts the events of a snapshot of an older format in (session,
// seq) order: those listed them by seq alone.
func sortEvents(evs []*fsmpb.Event) {
	slices.SortFunc(evs, func(a, b *fsmpb.Event) int {
		return cmp.Or(cmp.Compare(a.SessionId, b.SessionId), cmp.Compare(a.Seq, b.Seq))
	})
}

// eventPager pages a snapshot's events in (session, seq) order: a page is
// stored once it is full or its session's events end, so only one page of
// events is held. A snapshot of this format lists its events in that order,
// and they are paged as they are read.
type eventPager struct {
	tx   *Txn
	cur  []*fsmpb.Event
	last *fsmpb.Event
}

// add takes the snapshot's next event; one out of order (or listed twice)
// means a damaged snapshot.
func (p *eventPager) add(ev *fsmpb.Event) error {
	if p.last != nil {
		switch c := cmp.Or(cmp.Compare(p.last.SessionId, ev.SessionId), cmp.Compare(p.last.Seq, ev.Seq)); {
		case c == 0:
			return fmt.Errorf("event %d of session %q is listed twice", ev.Seq, ev.SessionId)
		case c > 0:
			return fmt.Errorf("event %d of session %q is out of order", ev.Seq, ev.SessionId)
		}
	}
	if len(p.cur) == EventPageSize || (len(p.cur) > 0 && p.cur[0].SessionId != ev.SessionId) {
		if err := p.flush(); err != nil {
			return err
		}
	}
	p.cur = append(p.cur, ev)
	p.last = ev
	return nil
}

// flush stores the page being filled.
func (p *eventPager) flush() error {
	if len(p.cur) == 0 {
		return nil
	}
	err := p.tx.insert(TableEvents, NewEventPage(p.cur[0].SessionId, p.cur...))
	p.cur = p.cur[:0]
	return err
}
