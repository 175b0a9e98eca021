package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// A session's history, inbox and accepted message ids are rows keyed by
// session. These helpers read and write them for the applier and the State
// alike; every one touches the rows it names, never the whole session.

// modelInputSize is the size of what the model would be sent now: the
// history from the compaction boundary on (the latest summary included).
func modelInputSize(tx *store.Txn, s *fsmpb.Session) uint64 {
	var before uint64
	if e := tx.HistoryBefore(s.Id, s.CompactedBefore); e != nil {
		before = e.CumSize
	}
	return s.HistorySize - before
}

// hasHistoryBefore reports whether anything not yet summarised comes before
// seq: only that is compacted, the new turn's messages stay as they are. At
// most one summary lies past the boundary, so this reads at most two rows.
func hasHistoryBefore(tx *store.Txn, s *fsmpb.Session, seq uint64) bool {
	found := false
	tx.SessionRows(store.TableHistory, s.Id, s.CompactedBefore, func(raw any) bool {
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
	s.HistorySize += store.EntrySize(e)
	s.HistoryCount++
	e.CumSize = s.HistorySize
	if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
		s.LatestSummarySeq = e.Seq
	}
	a.insert(store.TableHistory, e)
}

// truncateHistory drops the entries from seq on (an operator's edit).
func (a *applier) truncateHistory(s *fsmpb.Session, from uint64) {
	var doomed []*fsmpb.HistoryEntry
	a.tx.SessionRows(store.TableHistory, s.Id, from, func(raw any) bool {
		doomed = append(doomed, raw.(*fsmpb.HistoryEntry))
		return true
	})
	for _, e := range doomed {
		a.delete(store.TableHistory, e)
	}
	s.HistoryCount -= uint64(len(doomed))
	s.HistorySize = 0
	if last := a.tx.HistoryBefore(s.Id, from); last != nil {
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
			e := a.tx.HistoryBefore(s.Id, seq)
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
	return a.tx.Accepted(sessionID, messageID)
}

// pushInbox accepts a message into the session's inbox.
func (a *applier) pushInbox(s *fsmpb.Session, m *fsmpb.InboxMessage) {
	if s.NextInbox == 0 {
		s.NextInbox = 1
	}
	m.SessionId, m.Seq = s.Id, s.NextInbox
	s.NextInbox++
	s.InboxCount++
	a.insert(store.TableAccepted, &fsmpb.AcceptedMessage{SessionId: s.Id, MessageId: m.Id})
	a.insert(store.TableInbox, m)
}

// drainInbox removes and returns the session's inbox messages in order.
func (a *applier) drainInbox(s *fsmpb.Session) []*fsmpb.InboxMessage {
	var out []*fsmpb.InboxMessage
	a.tx.SessionRows(store.TableInbox, s.Id, 0, func(raw any) bool {
		out = append(out, raw.(*fsmpb.InboxMessage))
		return true
	})
	for _, m := range out {
		a.delete(store.TableInbox, m)
	}
	s.InboxCount = 0
	return out
}

func (a *applier) delete(table string, obj any) { a.tx.Remove(table, obj) }
