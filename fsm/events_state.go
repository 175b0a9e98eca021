package fsm

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Events returns a session's events with a sequence number above after, in
// order: one seek on the (session, seq) index.
func (s *State) Events(sessionID string, after uint64) []*dexv1.Event {
	it, err := s.tx.LowerBound(tableEvents, indexSessionSeq, sessionID, after+1)
	if err != nil || after == ^uint64(0) {
		return nil
	}
	var out []*dexv1.Event
	for raw := it.Next(); raw != nil; raw = it.Next() {
		e := raw.(*dexv1.Event)
		if e.SessionId != sessionID {
			break
		}
		out = append(out, e)
	}
	return out
}

// EventLog returns what is kept of a session's events, or nil when it never
// had one.
func (s *State) EventLog(sessionID string) *dexv1.EventLog {
	raw, err := s.tx.First(tableEventLogs, indexID, sessionID)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*dexv1.EventLog)
}

// EventsWatch returns a channel closed when the session's events change (an
// event emitted or dropped). Commands on other sessions do not close it.
// It is the watch of the session's EventLog row; for a session without one
// it is the nearest node of that table and may fire early.
func (s *State) EventsWatch(sessionID string) <-chan struct{} {
	ch, _, err := s.tx.FirstWatch(tableEventLogs, indexID, sessionID)
	if err != nil {
		return nil
	}
	return ch
}

// EventRetention returns the retention in force (zero fields: no limit).
func (s *State) EventRetention() *dexv1.EventRetention {
	if r := s.Meta().GetEventRetention(); r != nil {
		return r
	}
	return &dexv1.EventRetention{}
}

// OldestEvent returns the event with the lowest seq, or nil.
func (s *State) OldestEvent() *dexv1.Event {
	raw, err := s.tx.First(tableEvents, indexID)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*dexv1.Event)
}

// EventLogsOver returns, in session order, up to limit sessions that keep
// more than count events.
func (s *State) EventLogsOver(count uint64, limit int) []string {
	it, err := s.tx.Get(tableEventLogs, indexID)
	if err != nil {
		return nil
	}
	var out []string
	for raw := it.Next(); raw != nil && len(out) < limit; raw = it.Next() {
		if l := raw.(*dexv1.EventLog); l.Count > count {
			out = append(out, l.SessionId)
		}
	}
	return out
}
