package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	memdb "github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"
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
// object, tables in a fixed order and objects in index order, so two equal
// states write equal bytes.
func (s *Snapshot) Persist(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(snapshotMagic); err != nil {
		return err
	}
	if err := bw.WriteByte(snapshotVersion); err != nil {
		return err
	}
	opts := protodelim.MarshalOptions{MarshalOptions: proto.MarshalOptions{Deterministic: true}}
	write := func(rec *fsmpb.SnapshotRecord) error {
		_, err := opts.MarshalTo(bw, rec)
		return err
	}
	st := &State{tx: s.tx}
	if err := write(&fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Meta{Meta: st.Meta()}}); err != nil {
		return err
	}
	for _, table := range []string{tableNodes, tableWorkers, tableTools, tableWorkerTools, tableSessions, tableHistory, tableInbox, tableAccepted, tableSteps, tableEvents, tableEventLogs, tableTokens} {
		it, err := s.tx.Get(table, indexID)
		if err != nil {
			return err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if p, ok := raw.(*eventPage); ok { // pages are stored, events written
				if err := p.eachEncoded(func(ev []byte) error { return writeEventRecord(bw, ev) }); err != nil {
					return err
				}
				continue
			}
			if err := write(record(raw)); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// writeEventRecord writes the snapshot record of one encoded event: the
// bytes protodelim writes for a SnapshotRecord holding that event.
func writeEventRecord(w io.Writer, ev []byte) error {
	const eventField = 6 // SnapshotRecord.event
	var hdr [24]byte
	rec := protowire.AppendVarint(hdr[:0], uint64(protowire.SizeTag(eventField)+protowire.SizeBytes(len(ev))))
	rec = protowire.AppendTag(rec, eventField, protowire.BytesType)
	rec = protowire.AppendVarint(rec, uint64(len(ev)))
	if _, err := w.Write(rec); err != nil {
		return err
	}
	_, err := w.Write(ev)
	return err
}

func record(raw any) *fsmpb.SnapshotRecord {
	switch v := raw.(type) {
	case *fsmpb.NodeInfo:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Node{Node: v}}
	case *fsmpb.WorkerInfo:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Worker{Worker: v}}
	case *fsmpb.ToolSpec:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Tool{Tool: v}}
	case *fsmpb.WorkerTool:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_WorkerTool{WorkerTool: v}}
	case *fsmpb.Session:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Session{Session: v}}
	case *fsmpb.Step:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Step{Step: v}}
	case *fsmpb.Event:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Event{Event: v}}
	case *fsmpb.HistoryEntry:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_History{History: v}}
	case *fsmpb.InboxMessage:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Inbox{Inbox: v}}
	case *fsmpb.AcceptedMessage:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Accepted{Accepted: v}}
	case *fsmpb.EventLog:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_EventLog{EventLog: v}}
	case *fsmpb.AclToken:
		return &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Token{Token: v}}
	}
	panic(fmt.Sprintf("fsm: no snapshot record for %T", raw))
}

// Release frees the snapshot.
func (s *Snapshot) Release() {}

// ErrBadSnapshot is returned for a snapshot that is not Dex's or is damaged.
var ErrBadSnapshot = errors.New("not a Dex state snapshot, or a damaged one")

// Restore replaces the whole state with a snapshot's. On error the state is
// left as it was.
func (f *FSM) Restore(r io.Reader) error {
	sr, err := newSnapshotReader(r)
	if err != nil {
		return err
	}
	version := sr.version
	next := newStore()
	tx := next.db.Txn(true)
	defer tx.Abort()
	var events []*fsmpb.Event // of an older format, paged at the end
	pager := &eventPager{tx: tx}
	for {
		rec, err := sr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n := sr.n - 1
		table, obj := "", any(nil)
		switch v := rec.Record.(type) {
		case *fsmpb.SnapshotRecord_Meta:
			table, obj = tableMeta, v.Meta
		case *fsmpb.SnapshotRecord_Node:
			table, obj = tableNodes, v.Node
		case *fsmpb.SnapshotRecord_Worker:
			table, obj = tableWorkers, v.Worker
		case *fsmpb.SnapshotRecord_Tool:
			table, obj = tableTools, v.Tool
		case *fsmpb.SnapshotRecord_WorkerTool:
			table, obj = tableWorkerTools, v.WorkerTool
		case *fsmpb.SnapshotRecord_Session:
			table, obj = tableSessions, v.Session
			if version == snapshotVersionV1 {
				if err := splitV1Session(tx, v.Session); err != nil {
					return fmt.Errorf("%w: record %d: %v", ErrBadSnapshot, n, err)
				}
			}
		case *fsmpb.SnapshotRecord_History:
			table, obj = tableHistory, v.History
		case *fsmpb.SnapshotRecord_Inbox:
			table, obj = tableInbox, v.Inbox
		case *fsmpb.SnapshotRecord_Accepted:
			table, obj = tableAccepted, v.Accepted
		case *fsmpb.SnapshotRecord_Step:
			table, obj = tableSteps, v.Step
		case *fsmpb.SnapshotRecord_Event:
			if version < 3 {
				events = append(events, v.Event)
			} else if err := pager.add(v.Event); err != nil {
				return fmt.Errorf("%w: record %d: %v", ErrBadSnapshot, n, err)
			}
			continue
		case *fsmpb.SnapshotRecord_EventLog:
			table, obj = tableEventLogs, v.EventLog
		case *fsmpb.SnapshotRecord_Token:
			table, obj = tableTokens, v.Token
		default:
			return fmt.Errorf("%w: record %d has an unknown type", ErrBadSnapshot, n)
		}
		if err := tx.Insert(table, obj); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrBadSnapshot, n, err)
		}
	}
	if err := pager.flush(); err != nil {
		return fmt.Errorf("%w: events: %v", ErrBadSnapshot, err)
	}
	if version < 3 {
		sortEvents(events)
		if err := upgradeEvents(tx, events); err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		for _, ev := range events {
			if err := pager.add(ev); err != nil {
				return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
			}
		}
		if err := pager.flush(); err != nil {
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
