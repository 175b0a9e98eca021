package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	memdb "github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// snapshotMagic opens every snapshot; the byte after it is the format version.
// Version 2 keeps history, inbox and accepted message ids as records of their
// own; version 1 carried them inside each session. Version 3 numbers each
// session's events (ordinals) and keeps in the EventLog only where they
// begin. Versions 1 and 2 still restore.
const (
	snapshotMagic     = "DEXSNAP"
	snapshotVersion   = 3
	snapshotVersionV1 = 1
)

// Snapshot is a point-in-time copy of the state, cheap to take: go-memdb's
// read transaction is immutable.
type Snapshot struct {
	tx *memdb.Txn
}

// Snapshot captures the state now.
func (f *FSM) Snapshot() *Snapshot {
	return &Snapshot{tx: f.db().Txn(false)}
}

// Persist writes the snapshot: a header, then one length-delimited record per
// object, tables in the order of stateTables and objects in index order, so
// two equal states write equal bytes.
func (s *Snapshot) Persist(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(snapshotMagic); err != nil {
		return err
	}
	if err := bw.WriteByte(snapshotVersion); err != nil {
		return err
	}
	sw := &snapshotWriter{w: bw}
	for i := range stateTables {
		t := &stateTables[i]
		var err error
		if t.persist != nil {
			err = t.persist(sw, t, s.tx)
		} else {
			err = sw.rows(t, s.tx)
		}
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// persistMeta writes the meta record, a state that has none yet too.
func persistMeta(w *snapshotWriter, t *stateTable, tx *memdb.Txn) error {
	return w.row(t, (&State{tx: tx}).Meta())
}

// persistEvents writes the events of the stored pages one record each.
func persistEvents(w *snapshotWriter, t *stateTable, tx *memdb.Txn) error {
	it, err := tx.Get(t.name, indexID)
	if err != nil {
		return err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if err := raw.(*eventPage).eachEncoded(func(ev []byte) error { return writeEventRecord(w.w, ev) }); err != nil {
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

// Release frees the snapshot.
func (s *Snapshot) Release() {}

// ErrBadSnapshot is returned for a snapshot that is not Dex's or is damaged.
var ErrBadSnapshot = errors.New("not a Dex state snapshot, or a damaged one")

// restoring is a Restore under way.
type restoring struct {
	tx      *memdb.Txn
	version byte
	pager   *eventPager
	// legacyEvents are the events of a snapshot older than format 3, paged
	// once all are read.
	legacyEvents []*fsmpb.Event
}

// Restore replaces the whole state with a snapshot's. On error the state is
// left as it was.
func (f *FSM) Restore(r io.Reader) error {
	sr, err := newSnapshotReader(r)
	if err != nil {
		return err
	}
	next := newStore()
	tx := next.db.Txn(true)
	defer tx.Abort()
	rs := &restoring{tx: tx, version: sr.version, pager: &eventPager{tx: tx}}
	for {
		rec, err := sr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n := sr.n - 1
		t := tableOf(rec)
		if t == nil {
			return fmt.Errorf("%w: record %d has an unknown type", ErrBadSnapshot, n)
		}
		row := t.row(rec)
		if t.restore != nil {
			err = t.restore(rs, row)
		} else {
			err = tx.Insert(t.name, row)
		}
		if err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrBadSnapshot, n, err)
		}
	}
	if err := rs.pager.flush(); err != nil {
		return fmt.Errorf("%w: events: %v", ErrBadSnapshot, err)
	}
	if rs.version < 3 {
		events := rs.legacyEvents
		sortEvents(events)
		if err := upgradeEvents(tx, events); err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		for _, ev := range events {
			if err := rs.pager.add(ev); err != nil {
				return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
			}
		}
		if err := rs.pager.flush(); err != nil {
			return fmt.Errorf("%w: events: %v", ErrBadSnapshot, err)
		}
	}
	rebuildCatalog(tx)
	tx.Commit()
	f.mu.Lock()
	old := f.cur.Swap(next)
	f.halted = nil
	f.mu.Unlock()
	close(old.abandon)
	return nil
}

// restoreSession inserts a session; one of format 1 first gives its inline
// history, inbox and accepted message ids rows of their own.
func restoreSession(r *restoring, row proto.Message) error {
	s := row.(*fsmpb.Session)
	if r.version == snapshotVersionV1 {
		if err := splitV1Session(r.tx, s); err != nil {
			return err
		}
	}
	return r.tx.Insert(tableSessions, s)
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
func splitV1Session(tx *memdb.Txn, s *fsmpb.Session) error {
	for _, e := range s.History {
		e.SessionId = s.Id
		s.HistorySize += entrySize(e)
		e.CumSize = s.HistorySize
		if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
			s.LatestSummarySeq = e.Seq
		}
		if err := tx.Insert(tableHistory, e); err != nil {
			return err
		}
	}
	s.HistoryCount = uint64(len(s.History))
	s.NextInbox = 1
	for _, row := range s.Inbox {
		row.SessionId, row.Seq = s.Id, s.NextInbox
		s.NextInbox++
		if err := tx.Insert(tableInbox, row); err != nil {
			return err
		}
	}
	s.InboxCount = uint32(len(s.Inbox))
	for _, id := range s.SeenMessageIds {
		if err := tx.Insert(tableAccepted, &fsmpb.AcceptedMessage{SessionId: s.Id, MessageId: id}); err != nil {
			return err
		}
	}
	s.History, s.Inbox, s.SeenMessageIds = nil, nil, nil
	return nil
}
