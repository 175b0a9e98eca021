package fsm

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	memdb "github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Events have a lifecycle: every session keeps at most the retention count
// of its newest events (trimmed as it emits) and none older than the
// retention age (pruned by the leader through PruneEvents). A session's
// events are kept in pages of up to eventPageSize, rows keyed (session,
// page key) and nothing else, so emitting one rewrites one bounded row and an
// event costs the index a sixteenth of a row. Each session's EventLog row
// says where what it keeps begins (the first kept event's seq, ordinal and
// time) and what was dropped; it is written when a session's first event is
// kept and when events are dropped, not per event.

const (
	tableEventLogs  = "event_logs"
	indexSessionSeq = indexID // events: (session, seq)
	// indexFirstAt: event logs by their first kept event's time, for the
	// retention age (logs that keep nothing are not in it).
	indexFirstAt = "first_at"

	// maxTrimPerEmit bounds the rows one emit deletes; after the retention
	// count is lowered a session shrinks by a few events per emit.
	maxTrimPerEmit = 4
	// MaxPruneEvents bounds the events one PruneEvents drops, and
	// MaxPruneSessions the sessions it names.
	MaxPruneEvents   = 1000
	MaxPruneSessions = 100

	// eventPageSize bounds the events of one page: what one emit copies.
	eventPageSize = 16
)

func firstKeptAt(obj any) (int64, bool) {
	l, ok := obj.(*fsmpb.EventLog)
	if !ok || l.FirstSeq == 0 {
		return 0, false
	}
	return l.FirstAtMs, true
}

// eventPageKey keys a page by (session, page key): sessionSeqKey's session
// id, NUL and key big endian, so one session's pages are contiguous and in
// order, and the prefix of one session never covers another whose id it
// begins.
var eventPageKey = sessionSeqKey[*eventPage]{
	func(p *eventPage) string { return p.SessionID }, func(p *eventPage) uint64 { return p.Key }}

// eventLogRow returns a session's EventLog row as stored (nil when none);
// callers that change it clone it first.
func eventLogRow(tx *memdb.Txn, sessionID string) *fsmpb.EventLog {
	raw, err := tx.First(tableEventLogs, indexID, sessionID)
	if err != nil {
		panic(fmt.Sprintf("fsm: read event log: %v", err))
	}
	if raw == nil {
		return nil
	}
	return raw.(*fsmpb.EventLog)
}

// eventLog returns a copy of a session's EventLog, a new one if it has none.
func (a *applier) eventLog(sessionID string) *fsmpb.EventLog {
	if l := eventLogRow(a.tx, sessionID); l != nil {
		return proto.Clone(l).(*fsmpb.EventLog)
	}
	return &fsmpb.EventLog{SessionId: sessionID}
}

// pageAtOrBefore returns the session's page with the highest key not above
// seq (the one that holds seq if it is kept), or nil.
func pageAtOrBefore(tx *memdb.Txn, sessionID string, seq uint64) *eventPage {
	it, err := tx.ReverseLowerBound(tableEvents, indexID, sessionID, seq)
	if err != nil {
		panic(fmt.Sprintf("fsm: seek events: %v", err))
	}
	raw := it.Next()
	if raw == nil || raw.(*eventPage).SessionID != sessionID {
		return nil
	}
	return raw.(*eventPage)
}

// eachEventFrom calls fn with the session's kept events whose seq is at
// least from, in order, until fn returns false.
func eachEventFrom(tx *memdb.Txn, sessionID string, from uint64, fn func(*fsmpb.Event) bool) {
	start := uint64(0)
	if p := pageAtOrBefore(tx, sessionID, from); p != nil {
		start = p.Key
	}
	it, err := tx.LowerBound(tableEvents, indexID, sessionID, start)
	if err != nil {
		panic(fmt.Sprintf("fsm: seek events: %v", err))
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		p := raw.(*eventPage)
		if p.SessionID != sessionID {
			return
		}
		if p.lastSeq < from {
			continue
		}
		more := true
		p.each(func(ev *fsmpb.Event) bool {
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

// lastEvent returns the page that holds the session's newest kept event
// (its lastSeq and lastOrdinal), or nil.
func lastEvent(tx *memdb.Txn, sessionID string) *eventPage {
	return pageAtOrBefore(tx, sessionID, math.MaxUint64)
}

// keptCount is how many events log's session keeps, last being the page of
// its newest.
func keptCount(log *fsmpb.EventLog, last *eventPage) uint64 {
	if log == nil || log.FirstSeq == 0 || last == nil {
		return 0
	}
	return last.lastOrdinal - log.FirstOrdinal + 1
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
	log := eventLogRow(a.tx, sessionID)
	last := pageAtOrBefore(a.tx, sessionID, math.MaxUint64)
	if log != nil && log.FirstSeq != 0 && last != nil {
		ev.Ordinal = last.lastOrdinal + 1
	}
	if last != nil && last.len() < eventPageSize {
		last = last.withEvent(ev)
	} else {
		last = newEventPage(sessionID, ev)
	}
	a.insert(tableEvents, last)
	if log == nil || log.FirstSeq == 0 {
		log = a.eventLog(sessionID)
		log.FirstSeq, log.FirstOrdinal, log.FirstAtMs = ev.Seq, ev.Ordinal, ev.AtMs
		a.insert(tableEventLogs, log)
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
	a.insert(tableEventLogs, log)
}

// nextEvent returns the session's first event with a seq of at least from.
func nextEvent(tx *memdb.Txn, sessionID string, from uint64) *fsmpb.Event {
	var out *fsmpb.Event
	eachEventFrom(tx, sessionID, from, func(ev *fsmpb.Event) bool { out = ev; return false })
	return out
}

// dropFirstEvent deletes the oldest kept event of log's session and moves
// log past it; the caller writes log.
func (a *applier) dropFirstEvent(log *fsmpb.EventLog) {
	p := pageAtOrBefore(a.tx, log.SessionId, log.FirstSeq)
	var ev *fsmpb.Event
	if p != nil {
		ev = p.first()
	}
	if ev == nil || ev.Seq != log.FirstSeq {
		panic(fmt.Sprintf("fsm: event log of %s names first event %d, which is missing", log.SessionId, log.FirstSeq))
	}
	if p.len() > 1 {
		a.insert(tableEvents, p.withoutFirst())
	} else if err := a.tx.Delete(tableEvents, p); err != nil {
		panic(fmt.Sprintf("fsm: delete event page: %v", err))
	}
	log.DroppedThrough = ev.Seq
	log.FirstSeq, log.FirstOrdinal, log.FirstAtMs = 0, 0, 0
	if next := nextEvent(a.tx, log.SessionId, ev.Seq+1); next != nil {
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
	m.EventRetention = proto.Clone(c.Retention).(*fsmpb.EventRetention)
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
		it, err := a.tx.Get(tableEventLogs, indexFirstAt)
		if err != nil {
			panic(err)
		}
		for raw := it.Next(); raw != nil && len(old) < budget; raw = it.Next() {
			l := raw.(*fsmpb.EventLog)
			if l.FirstAtMs >= cutoff {
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
			a.insert(tableEventLogs, log)
		}
	}
	if limit := ret.GetCount(); limit > 0 {
		for _, id := range c.SessionIds {
			log := a.eventLog(id)
			last := lastEvent(a.tx, id)
			if keptCount(log, last) <= limit || budget == 0 {
				continue
			}
			for keptCount(log, last) > limit && budget > 0 {
				a.dropFirstEvent(log)
				budget--
			}
			a.insert(tableEventLogs, log)
		}
	}
	return &Result{}
}

// upgradeEvents brings the events of a snapshot written before version 3 to
// this layout: ordinals numbered per session in seq order, and every session
// with events given an EventLog that starts at its first (a version 1
// snapshot had none; a version 2 one counted every event in its row). evs
// are sorted by sortEvents and fresh from the snapshot; one listed twice is
// refused when they are paged.
func upgradeEvents(tx *memdb.Txn, evs []*fsmpb.Event) error {
	var logs []*fsmpb.EventLog
	var cur *fsmpb.EventLog
	var ord uint64
	for _, ev := range evs {
		if cur == nil || cur.SessionId != ev.SessionId {
			cur = &fsmpb.EventLog{SessionId: ev.SessionId, FirstSeq: ev.Seq, FirstOrdinal: 1, FirstAtMs: ev.AtMs}
			if have := eventLogRow(tx, ev.SessionId); have != nil {
				cur.DroppedThrough = have.DroppedThrough
			}
			logs = append(logs, cur)
			ord = 0
		}
		ord++
		ev.Ordinal = ord
	}
	for _, l := range logs {
		if err := tx.Insert(tableEventLogs, l); err != nil {
			return err
		}
	}
	// Logs of sessions that keep no event keep only what was dropped.
	var empty []*fsmpb.EventLog
	lit, err := tx.Get(tableEventLogs, indexID)
	if err != nil {
		return err
	}
	for raw := lit.Next(); raw != nil; raw = lit.Next() {
		if l := raw.(*fsmpb.EventLog); l.Count != 0 || l.LastSeq != 0 {
			empty = append(empty, &fsmpb.EventLog{SessionId: l.SessionId, DroppedThrough: l.DroppedThrough})
		}
	}
	for _, l := range empty {
		if err := tx.Insert(tableEventLogs, l); err != nil {
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
	tx   *memdb.Txn
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
	if len(p.cur) == eventPageSize || (len(p.cur) > 0 && p.cur[0].SessionId != ev.SessionId) {
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
	err := p.tx.Insert(tableEvents, newEventPage(p.cur[0].SessionId, p.cur...))
	p.cur = p.cur[:0]
	return err
}
