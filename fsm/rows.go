package fsm

import (
	"fmt"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// A session's history, inbox and accepted message ids are rows keyed by
// session. These helpers read and write them for the applier and the State
// alike; every one touches the rows it names, never the whole session.

// sessionRows calls fn for the session's rows of a (session, seq) table with
// seq >= from, in seq order, until fn returns false.
func sessionRows(tx *memdb.Txn, table, sessionID string, from uint64, fn func(raw any) bool) {
	it, err := tx.LowerBound(table, indexID, sessionID, from)
	if err != nil {
		panic(fmt.Sprintf("fsm: read %s: %v", table, err))
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
	}
	panic(fmt.Sprintf("fsm: %T is not a session row", raw))
}

// historyBefore returns the last history entry of the session with a seq
// below seq, or nil.
func historyBefore(tx *memdb.Txn, sessionID string, seq uint64) *fsmpb.HistoryEntry {
	if seq == 0 {
		return nil
	}
	it, err := tx.ReverseLowerBound(tableHistory, indexID, sessionID, seq-1)
	if err != nil {
		panic(fmt.Sprintf("fsm: read history: %v", err))
	}
	if raw := it.Next(); raw != nil {
		if e := raw.(*fsmpb.HistoryEntry); e.SessionId == sessionID {
			return e
		}
	}
	return nil
}

// historyEntry returns one history entry, or nil.
func historyEntry(tx *memdb.Txn, sessionID string, seq uint64) *fsmpb.HistoryEntry {
	raw, err := tx.First(tableHistory, indexID, sessionID, seq)
	if err != nil {
		panic(fmt.Sprintf("fsm: read history: %v", err))
	}
	if raw == nil {
		return nil
	}
	return raw.(*fsmpb.HistoryEntry)
}

// entrySize is an entry's share of what the model is sent, in characters.
func entrySize(e *fsmpb.HistoryEntry) uint64 {
	n := uint64(len(e.Text) + len(e.Arguments))
	for _, c := range e.ToolCalls {
		n += uint64(len(c.Arguments))
	}
	for _, r := range e.InlineResults {
		n += uint64(len(r.Arguments) + len(r.Content))
	}
	return n
}

// modelInputSize is the size of what the model would be sent now: the
// history from the compaction boundary on (the latest summary included).
func modelInputSize(tx *memdb.Txn, s *fsmpb.Session) uint64 {
	var before uint64
	if e := historyBefore(tx, s.Id, s.CompactedBefore); e != nil {
		before = e.CumSize
	}
	return s.HistorySize - before
}

// hasHistoryBefore reports whether anything not yet summarised comes before
// seq: only that is compacted, the new turn's messages stay as they are. At
// most one summary lies past the boundary, so this reads at most two rows.
func hasHistoryBefore(tx *memdb.Txn, s *fsmpb.Session, seq uint64) bool {
	found := false
	sessionRows(tx, tableHistory, s.Id, s.CompactedBefore, func(raw any) bool {
		e := raw.(*fsmpb.HistoryEntry)
		if e.Seq >= seq {
			return false
		}
		if e.Kind != fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
			found = true
			return false
		}
		return true
	})
	return found
}

func (a *applier) appendHistory(s *fsmpb.Session, e *fsmpb.HistoryEntry) {
	e.SessionId = s.Id
	e.Seq = s.NextHistory
	e.AtMs = a.now
	s.NextHistory++
	s.HistorySize += entrySize(e)
	s.HistoryCount++
	e.CumSize = s.HistorySize
	if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
		s.LatestSummarySeq = e.Seq
	}
	a.insert(tableHistory, e)
}

// truncateHistory drops the entries from seq on (an operator's edit).
func (a *applier) truncateHistory(s *fsmpb.Session, from uint64) {
	var doomed []*fsmpb.HistoryEntry
	sessionRows(a.tx, tableHistory, s.Id, from, func(raw any) bool {
		doomed = append(doomed, raw.(*fsmpb.HistoryEntry))
		return true
	})
	for _, e := range doomed {
		a.delete(tableHistory, e)
	}
	s.HistoryCount -= uint64(len(doomed))
	s.HistorySize = 0
	if last := historyBefore(a.tx, s.Id, from); last != nil {
		s.HistorySize = last.CumSize
	}
	// Cutting the boundary or the summary that stands for what lies before
	// it sends the model the whole history that is left.
	if s.CompactedBefore >= from || s.LatestSummarySeq >= from {
		s.CompactedBefore = 0
	}
	if s.LatestSummarySeq >= from {
		s.LatestSummarySeq = 0
		for seq := from; seq > 1; {
			e := historyBefore(a.tx, s.Id, seq)
			if e == nil {
				break
			}
			if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
				s.LatestSummarySeq = e.Seq
				break
			}
			seq = e.Seq
		}
	}
}

// accepted reports whether the session accepted a message id before.
func (a *applier) accepted(sessionID, messageID string) bool {
	raw, err := a.tx.First(tableAccepted, indexID, sessionID, messageID)
	if err != nil {
		panic(fmt.Sprintf("fsm: read accepted: %v", err))
	}
	return raw != nil
}

// pushInbox accepts a message into the session's inbox.
func (a *applier) pushInbox(s *fsmpb.Session, m *fsmpb.InboxMessage) {
	if s.NextInbox == 0 {
		s.NextInbox = 1
	}
	m.SessionId, m.Seq = s.Id, s.NextInbox
	s.NextInbox++
	s.InboxCount++
	a.insert(tableAccepted, &fsmpb.AcceptedMessage{SessionId: s.Id, MessageId: m.Id})
	a.insert(tableInbox, m)
}

// drainInbox removes and returns the session's inbox messages in order.
func (a *applier) drainInbox(s *fsmpb.Session) []*fsmpb.InboxMessage {
	var out []*fsmpb.InboxMessage
	sessionRows(a.tx, tableInbox, s.Id, 0, func(raw any) bool {
		out = append(out, raw.(*fsmpb.InboxMessage))
		return true
	})
	for _, m := range out {
		a.delete(tableInbox, m)
	}
	s.InboxCount = 0
	return out
}

func (a *applier) delete(table string, obj any) {
	if err := a.tx.Delete(table, obj); err != nil {
		panic(fmt.Sprintf("fsm: delete %s: %v", table, err))
	}
}
