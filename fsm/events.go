package fsm

import (
	"fmt"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Events have a lifecycle: every session keeps at most the retention count
// of its newest events (trimmed as it emits) and none older than the
// retention age (pruned by the leader through PruneEvents). A session's
// events are kept in pages of up to store.EventPageSize, rows keyed (session,
// page key) and nothing else, so emitting one rewrites one bounded row and an
// event costs the index a sixteenth of a row. Each session's EventLog row
// says where what it keeps begins (the first kept event's seq, ordinal and
// time) and what was dropped; it is written when a session's first event is
// kept and when events are dropped, not per event.

const (
	// maxTrimPerEmit bounds the rows one emit deletes; after the retention
	// count is lowered a session shrinks by a few events per emit.
	maxTrimPerEmit = 4
	// MaxPruneEvents bounds the events one PruneEvents drops, and
	// MaxPruneSessions the sessions it names.
	MaxPruneEvents   = 1000
	MaxPruneSessions = 100
)

// eventLog returns a copy of a session's EventLog, a new one if it has none.
func (a *applier) eventLog(sessionID string) *fsmpb.EventLog {
	if l := a.tx.EventLog(sessionID); l != nil {
		return l.CloneVT()
	}
	return &fsmpb.EventLog{SessionId: sessionID}
}

// keptCount is how many events log's session keeps, last being the page of
// its newest.
func keptCount(log *fsmpb.EventLog, last *store.EventPage) uint64 {
	if log == nil || log.FirstSeq == 0 || last == nil {
		return 0
	}
	return last.LastOrdinal() - log.FirstOrdinal + 1
}

// emit appends a session event for watchers and trims the session's oldest
// events down to the retention count. It writes the event's row, and the
// session's EventLog only when it starts or drops events.
func (a *applier) emit(sessionID, typ, stepID, detail string) {
	m := a.meta()
	m.NextEventSeq++
	ev := &fsmpb.Event{
		Seq: m.NextEventSeq, SessionId: sessionID, Type: typ, StepId: stepID, Detail: detail, AtMs: a.now, Ordinal: 1,
	}
	log := a.tx.EventLog(sessionID)
	last := a.tx.LastEventPage(sessionID)
	if log != nil && log.FirstSeq != 0 && last != nil {
		ev.Ordinal = last.LastOrdinal() + 1
	}
	if last != nil && last.Len() < store.EventPageSize {
		last = last.WithEvent(ev)
	} else {
		last = store.NewEventPage(sessionID, ev)
	}
	a.insert(store.TableEvents, last)
	if log == nil || log.FirstSeq == 0 {
		log = a.eventLog(sessionID)
		log.FirstSeq, log.FirstOrdinal, log.FirstAtMs = ev.Seq, ev.Ordinal, ev.AtMs
		a.insert(store.TableEventLogs, log)
		return
	}
	limit := m.GetEventRetention().GetCount()
	if limit == 0 || keptCount(log, last) <= limit {
		return
	}
	log = a.eventLog(sessionID)
	for n := 0; keptCount(log, last) > limit && n < maxTrimPerEmit; n++ {
		a.dropFirstEvent(log)
	}
	a.insert(store.TableEventLogs, log)
}

// dropFirstEvent deletes the oldest kept event of log's session and moves
// log past it; the caller writes log.
func (a *applier) dropFirstEvent(log *fsmpb.EventLog) {
	p := a.tx.PageAtOrBefore(log.SessionId, log.FirstSeq)
	var ev *fsmpb.Event
	if p != nil {
		ev = p.First()
	}
	if ev == nil || ev.Seq != log.FirstSeq {
		panic(fmt.Sprintf("fsm: event log of %s names first event %d, which is missing", log.SessionId, log.FirstSeq))
	}
	if p.Len() > 1 {
		a.insert(store.TableEvents, p.WithoutFirst())
	} else {
		a.delete(store.TableEvents, p)
	}
	log.DroppedThrough = ev.Seq
	log.FirstSeq, log.FirstOrdinal, log.FirstAtMs = 0, 0, 0
	if next := a.tx.NextEvent(log.SessionId, ev.Seq+1); next != nil {
		log.FirstSeq, log.FirstOrdinal, log.FirstAtMs = next.Seq, next.Ordinal, next.AtMs
	}
}

// checkEventRetention refuses a SetEventRetention whose fields are out of range, before its epoch
// is checked.
func checkEventRetention(c *fsmpb.SetEventRetention) *Rejection {
	if c.Retention == nil {
		return reject(CodeInvalid, "retention is required")
	}
	if c.Retention.AgeMs < 0 {
		return reject(CodeInvalid, "retention age must not be negative, got %d ms", c.Retention.AgeMs)
	}
	return nil
}

func (a *applier) setEventRetention(c *fsmpb.SetEventRetention) *Result {
	m := a.meta()
	m.EventRetention = c.Retention.CloneVT()
	return &Result{}
}

// checkPruneEvents refuses a PruneEvents whose fields are out of range, before its epoch
// is checked.
func checkPruneEvents(c *fsmpb.PruneEvents) *Rejection {
	if c.MaxEvents == 0 || c.MaxEvents > MaxPruneEvents {
		return reject(CodeInvalid, "max_events must be 1..%d, got %d", MaxPruneEvents, c.MaxEvents)
	}
	if len(c.SessionIds) > MaxPruneSessions {
		return reject(CodeInvalid, "at most %d sessions per prune, got %d", MaxPruneSessions, len(c.SessionIds))
	}
	return nil
}

// pruneEvents drops the events older than the retention age, sessions whose
// first kept event is oldest first (within a session it stops at the first
// event still young, so an event stamped by a leader whose clock ran behind
// waits for the ones before it), then trims the named sessions to the
// retention count, within max_events.
func (a *applier) pruneEvents(c *fsmpb.PruneEvents) *Result {
	ret := a.meta().GetEventRetention()
	budget := int(c.MaxEvents)
	if age := ret.GetAgeMs(); age > 0 {
		cutoff := a.now - age
		// Collected first: the tree is not changed while it is iterated.
		var old []string
		for l := range a.tx.EventLogsByFirstAt() {
			if len(old) >= budget || l.FirstAtMs >= cutoff {
				break
			}
			old = append(old, l.SessionId)
		}
		for _, id := range old {
			log := a.eventLog(id)
			for budget > 0 && log.FirstSeq != 0 && log.FirstAtMs < cutoff {
				a.dropFirstEvent(log)
				budget--
			}
			a.insert(store.TableEventLogs, log)
		}
	}
	if limit := ret.GetCount(); limit > 0 {
		for _, id := range c.SessionIds {
			log := a.eventLog(id)
			last := a.tx.LastEventPage(id)
			if keptCount(log, last) <= limit || budget == 0 {
				continue
			}
			for keptCount(log, last) > limit && budget > 0 {
				a.dropFirstEvent(log)
				budget--
			}
			a.insert(store.TableEventLogs, log)
		}
	}
	return &Result{}
}
