package store

import (
	"fmt"
	"math"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Typed reads of the rows every command touches. Each returns the row as
// stored (shared: clone it before changing it) or nil when there is none.
// An index error can only be a schema bug, so it panics.

func (t *Txn) first(table, index string, args ...any) any {
	raw, err := t.mem().First(table, index, args...)
	if err != nil {
		panic(fmt.Sprintf("store: read %s: %v", table, err))
	}
	return raw
}

// Meta returns the cluster-wide counters, a fresh empty row when the state
// has none yet.
func (t *Txn) Meta() *fsmpb.ClusterMeta {
	if m := t.StoredMeta(); m != nil {
		return m
	}
	return &fsmpb.ClusterMeta{Id: MetaID}
}

// StoredMeta returns the meta row, or nil when none was written yet.
func (t *Txn) StoredMeta() *fsmpb.ClusterMeta {
	raw := t.first(TableMeta, IndexID, MetaID)
	if raw == nil {
		return nil
	}
	return raw.(*fsmpb.ClusterMeta)
}

// Session returns a session's header row, tombstone or not.
func (t *Txn) Session(id string) *fsmpb.Session {
	raw := t.first(TableSessions, IndexID, id)
	if raw == nil {
		return nil
	}
	return raw.(*fsmpb.Session)
}

// Step returns a Step by id.
func (t *Txn) Step(id string) *fsmpb.Step {
	raw := t.first(TableSteps, IndexID, id)
	if raw == nil {
		return nil
	}
	return raw.(*fsmpb.Step)
}

// Worker returns a registered Worker.
func (t *Txn) Worker(id string) *fsmpb.WorkerInfo {
	raw := t.first(TableWorkers, IndexID, id)
	if raw == nil {
		return nil
	}
	return raw.(*fsmpb.WorkerInfo)
}

// EventLog returns a session's EventLog row.
func (t *Txn) EventLog(sessionID string) *fsmpb.EventLog {
	raw := t.first(TableEventLogs, IndexID, sessionID)
	if raw == nil {
		return nil
	}
	return raw.(*fsmpb.EventLog)
}

// A session's history, inbox and accepted message ids are rows keyed by
// session; these read them for the rules and the State alike, every one
// touching the rows it names, never the whole session.

// SessionRows calls fn for the session's rows of a (session, seq) table
// (history, inbox) with seq >= from, in seq order, until fn returns false.
func (t *Txn) SessionRows(table, sessionID string, from uint64, fn func(raw any) bool) {
	it, err := t.mem().LowerBound(table, IndexID, sessionID, from)
	if err != nil {
		panic(fmt.Sprintf("store: read %s: %v", table, err))
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if rowSession(raw) != sessionID || !fn(raw) {
			return
		}
	}
}

func rowSession(raw any) string {
	switch v := raw.(type) {
	case *fsmpb.HistoryEntry:
		return v.SessionId
	case *fsmpb.InboxMessage:
		return v.SessionId
	case *fsmpb.FoldedTurn:
		return v.SessionId
	}
	panic(fmt.Sprintf("store: %T is not a session row", raw))
}

// HistoryBefore returns the last history entry of the session with a seq
// below seq, or nil.
func (t *Txn) HistoryBefore(sessionID string, seq uint64) *fsmpb.HistoryEntry {
	if seq == 0 {
		return nil
	}
	it, err := t.mem().ReverseLowerBound(TableHistory, IndexID, sessionID, seq-1)
	if err != nil {
		panic(fmt.Sprintf("store: read history: %v", err))
	}
	if raw := it.Next(); raw != nil {
		if e := raw.(*fsmpb.HistoryEntry); e.SessionId == sessionID {
			return e
		}
	}
	return nil
}

// HistoryEntry returns one history entry, or nil.
func (t *Txn) HistoryEntry(sessionID string, seq uint64) *fsmpb.HistoryEntry {
	raw := t.first(TableHistory, IndexID, sessionID, seq)
	if raw == nil {
		return nil
	}
	return raw.(*fsmpb.HistoryEntry)
}

// Accepted reports whether the session accepted a message id before.
func (t *Txn) Accepted(sessionID, messageID string) bool {
	return t.first(TableAccepted, IndexID, sessionID, messageID) != nil
}

// EntrySize is an entry's share of what the model is sent, in characters:
// the running HistorySize and CumSize figures of a session add it up.
func EntrySize(e *fsmpb.HistoryEntry) uint64 {
	n := uint64(len(e.Text) + len(e.Arguments))
	for _, c := range e.ToolCalls {
		n += uint64(len(c.Arguments))
	}
	for _, r := range e.InlineResults {
		n += uint64(len(r.Arguments) + len(r.Content))
	}
	return n
}

// A session's events are kept in pages (EventPage) keyed (session, page
// key).

// PageAtOrBefore returns the session's page with the highest key not above
// seq (the one that holds seq if it is kept), or nil.
func (t *Txn) PageAtOrBefore(sessionID string, seq uint64) *EventPage {
	it, err := t.mem().ReverseLowerBound(TableEvents, IndexID, sessionID, seq)
	if err != nil {
		panic(fmt.Sprintf("store: seek events: %v", err))
	}
	raw := it.Next()
	if raw == nil || raw.(*EventPage).SessionID != sessionID {
		return nil
	}
	return raw.(*EventPage)
}

// LastEventPage returns the page that holds the session's newest kept event
// (its LastSeq and LastOrdinal), or nil.
func (t *Txn) LastEventPage(sessionID string) *EventPage {
	return t.PageAtOrBefore(sessionID, math.MaxUint64)
}

// EachEventFrom calls fn with the session's kept events whose seq is at
// least from, in order, until fn returns false.
func (t *Txn) EachEventFrom(sessionID string, from uint64, fn func(*fsmpb.Event) bool) {
	start := uint64(0)
	if p := t.PageAtOrBefore(sessionID, from); p != nil {
		start = p.Key
	}
	it, err := t.mem().LowerBound(TableEvents, IndexID, sessionID, start)
	if err != nil {
		panic(fmt.Sprintf("store: seek events: %v", err))
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		p := raw.(*EventPage)
		if p.SessionID != sessionID {
			return
		}
		if p.lastSeq < from {
			continue
		}
		more := true
		p.Each(func(ev *fsmpb.Event) bool {
			if ev.Seq >= from {
				more = fn(ev)
			}
			return more
		})
		if !more {
			return
		}
	}
}

// NextEvent returns the session's first kept event with a seq of at least
// from, or nil.
func (t *Txn) NextEvent(sessionID string, from uint64) *fsmpb.Event {
	var out *fsmpb.Event
	t.EachEventFrom(sessionID, from, func(ev *fsmpb.Event) bool { out = ev; return false })
	return out
}
