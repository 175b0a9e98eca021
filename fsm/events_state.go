package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Events returns a session's events with a sequence number above after, in
// order: a seek on the session's event pages.
func (s *State) Events(sessionID string, after uint64) []*fsmpb.Event {
	if after == ^uint64(0) {
		return nil
	}
	var out []*fsmpb.Event
	s.tx.EachEventFrom(sessionID, after+1, func(ev *fsmpb.Event) bool {
		out = append(out, ev)
		return true
	})
	return out
}

// EventLog returns what is kept of a session's events (count, first and
// last seq, what was dropped), or nil when it never had one.
func (s *State) EventLog(sessionID string) *fsmpb.EventLog {
	row := s.tx.EventLog(sessionID)
	if row == nil {
		return nil
	}
	// A session that keeps none: its last seq is the last one dropped.
	out := &fsmpb.EventLog{SessionId: sessionID, DroppedThrough: row.DroppedThrough, LastSeq: row.DroppedThrough}
	if last := s.tx.LastEventPage(sessionID); row.FirstSeq != 0 && last != nil {
		out.Count, out.FirstSeq, out.LastSeq = keptCount(row, last), row.FirstSeq, last.LastSeq()
		out.FirstOrdinal, out.FirstAtMs = row.FirstOrdinal, row.FirstAtMs
	}
	return out
}

// EventsWatch returns a channel closed when the session's events change (an
// event emitted or dropped). Commands on other sessions do not close it: it
// watches the index node of the session's own events (for a session without
// any, the nearest node above, which may fire early).
func (s *State) EventsWatch(sessionID string) <-chan struct{} {
	return s.tx.EventsWatch(sessionID)
}

// EventRetention returns the retention in force (zero fields: no limit).
func (s *State) EventRetention() *fsmpb.EventRetention {
	if r := s.Meta().GetEventRetention(); r != nil {
		return r
	}
	return &fsmpb.EventRetention{}
}

// OldestKeptEventAt returns the time of the oldest event any session still
// keeps by its EventLog (ok false when none keeps one).
func (s *State) OldestKeptEventAt() (int64, bool) {
	l := s.tx.OldestEventLog()
	if l == nil {
		return 0, false
	}
	return l.FirstAtMs, true
}

// EventLogsOver returns, in session order, up to limit sessions that keep
// more than count events. It reads every EventLog: the collector calls it
// once per retention count it enforces, not per tick.
func (s *State) EventLogsOver(count uint64, limit int) []string {
	var out []string
	for l := range s.tx.EventLogs() {
		if len(out) >= limit {
			break
		}
		if l.FirstSeq != 0 && keptCount(l, s.tx.LastEventPage(l.SessionId)) > count {
			out = append(out, l.SessionId)
		}
	}
	return out
}
