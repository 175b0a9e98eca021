package fsm

import (
	"fmt"

	memdb "github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Events have a lifecycle: every session keeps at most the retention count
// of its newest events (trimmed as it emits) and none older than the
// retention age (pruned by the leader through PruneEvents). Each session's
// EventLog row records what is kept and what was dropped.

const (
	tableEventLogs  = "event_logs"
	indexSessionSeq = "session_seq"

	// maxTrimPerEmit bounds the rows one emit deletes; after the retention
	// count is lowered a session shrinks by a few events per emit.
	maxTrimPerEmit = 4
	// MaxPruneEvents bounds the events one PruneEvents drops, and
	// MaxPruneSessions the sessions it names.
	MaxPruneEvents   = 1000
	MaxPruneSessions = 100
)

// withEventSchema adds the events' (session, seq) index and the EventLog
// table to the schema.
func withEventSchema(s *memdb.DBSchema) *memdb.DBSchema {
	s.Tables[tableEvents].Indexes[indexSessionSeq] = &memdb.IndexSchema{
		Name: indexSessionSeq, Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
			&memdb.StringFieldIndex{Field: "SessionId"}, &memdb.UintFieldIndex{Field: "Seq"},
		}},
	}
	s.Tables[tableEventLogs] = &memdb.TableSchema{Name: tableEventLogs, Indexes: map[string]*memdb.IndexSchema{
		indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "SessionId"}},
	}}
	return s
}

// eventLog returns a copy of a session's EventLog, a new one if it has none.
func (a *applier) eventLog(sessionID string) *dexv1.EventLog {
	raw, err := a.tx.First(tableEventLogs, indexID, sessionID)
	if err != nil {
		panic(fmt.Sprintf("fsm: read event log: %v", err))
	}
	if raw == nil {
		return &dexv1.EventLog{SessionId: sessionID}
	}
	return proto.Clone(raw.(*dexv1.EventLog)).(*dexv1.EventLog)
}

// emit appends a session event for watchers and trims the session's oldest
// events down to the retention count.
func (a *applier) emit(sessionID, typ, stepID, detail string) {
	m := a.meta()
	m.NextEventSeq++
	a.insert(tableEvents, &dexv1.Event{
		Seq: m.NextEventSeq, SessionId: sessionID, Type: typ, StepId: stepID, Detail: detail, AtMs: a.now,
	})
	log := a.eventLog(sessionID)
	if log.Count == 0 {
		log.FirstSeq = m.NextEventSeq
	}
	log.Count++
	log.LastSeq = m.NextEventSeq
	limit := m.GetEventRetention().GetCount()
	for n := 0; limit > 0 && log.Count > limit && n < maxTrimPerEmit; n++ {
		a.dropFirstEvent(log)
	}
	a.insert(tableEventLogs, log)
}

// nextEvent returns the session's first event with a seq of at least from.
func nextEvent(tx *memdb.Txn, sessionID string, from uint64) *dexv1.Event {
	it, err := tx.LowerBound(tableEvents, indexSessionSeq, sessionID, from)
	if err != nil {
		panic(fmt.Sprintf("fsm: seek events: %v", err))
	}
	raw := it.Next()
	if raw == nil || raw.(*dexv1.Event).SessionId != sessionID {
		return nil
	}
	return raw.(*dexv1.Event)
}

// dropFirstEvent deletes the oldest kept event of log's session and moves
// log past it; the caller writes log.
func (a *applier) dropFirstEvent(log *dexv1.EventLog) {
	ev := nextEvent(a.tx, log.SessionId, log.FirstSeq)
	if ev == nil || ev.Seq != log.FirstSeq {
		panic(fmt.Sprintf("fsm: event log of %s names first event %d, which is missing", log.SessionId, log.FirstSeq))
	}
	if err := a.tx.Delete(tableEvents, ev); err != nil {
		panic(fmt.Sprintf("fsm: delete event: %v", err))
	}
	log.Count--
	log.DroppedThrough = ev.Seq
	log.FirstSeq = 0
	if next := nextEvent(a.tx, log.SessionId, ev.Seq+1); next != nil {
		log.FirstSeq = next.Seq
	}
}

func (a *applier) setEventRetention(c *dexv1.SetEventRetention) *Result {
	if c.Retention == nil {
		return rejected(reject(CodeInvalid, "retention is required"))
	}
	if c.Retention.AgeMs < 0 {
		return rejected(reject(CodeInvalid, "retention age must not be negative, got %d ms", c.Retention.AgeMs))
	}
	if r := a.checkEpoch(c.Epoch); r != nil {
		return rejected(r)
	}
	m := a.meta()
	m.EventRetention = proto.Clone(c.Retention).(*dexv1.EventRetention)
	return &Result{}
}

// pruneEvents drops, oldest first, the events older than the retention age
// (the oldest by seq; it stops at the first one still young, so an event
// stamped by a leader whose clock ran behind waits for the ones before it),
// then trims the named sessions to the retention count, within max_events.
func (a *applier) pruneEvents(c *dexv1.PruneEvents) *Result {
	if c.MaxEvents == 0 || c.MaxEvents > MaxPruneEvents {
		return rejected(reject(CodeInvalid, "max_events must be 1..%d, got %d", MaxPruneEvents, c.MaxEvents))
	}
	if len(c.SessionIds) > MaxPruneSessions {
		return rejected(reject(CodeInvalid, "at most %d sessions per prune, got %d", MaxPruneSessions, len(c.SessionIds)))
	}
	if r := a.checkEpoch(c.Epoch); r != nil {
		return rejected(r)
	}
	ret := a.meta().GetEventRetention()
	budget := int(c.MaxEvents)
	if age := ret.GetAgeMs(); age > 0 {
		cutoff := a.now - age
		// Collected first: the tree is not changed while it is iterated.
		var old []*dexv1.Event
		it, err := a.tx.Get(tableEvents, indexID)
		if err != nil {
			panic(err)
		}
		for raw := it.Next(); raw != nil && len(old) < budget; raw = it.Next() {
			ev := raw.(*dexv1.Event)
			if ev.AtMs >= cutoff {
				break
			}
			old = append(old, ev)
		}
		for _, ev := range old {
			// The oldest event overall is the first kept of its session.
			log := a.eventLog(ev.SessionId)
			a.dropFirstEvent(log)
			a.insert(tableEventLogs, log)
		}
		budget -= len(old)
	}
	if limit := ret.GetCount(); limit > 0 {
		for _, id := range c.SessionIds {
			log := a.eventLog(id)
			if log.Count <= limit || budget == 0 {
				continue
			}
			for log.Count > limit && budget > 0 {
				a.dropFirstEvent(log)
				budget--
			}
			a.insert(tableEventLogs, log)
		}
	}
	return &Result{}
}

// rebuildEventLogs derives the EventLog of every session that has events
// but no log (a snapshot written before events had a lifecycle).
func rebuildEventLogs(tx *memdb.Txn) error {
	it, err := tx.Get(tableEvents, indexSessionSeq)
	if err != nil {
		return err
	}
	var logs []*dexv1.EventLog
	var cur *dexv1.EventLog
	for raw := it.Next(); raw != nil; raw = it.Next() {
		ev := raw.(*dexv1.Event)
		if cur == nil || cur.SessionId != ev.SessionId {
			cur = nil
			if have, err := tx.First(tableEventLogs, indexID, ev.SessionId); err != nil {
				return err
			} else if have != nil {
				continue
			}
			cur = &dexv1.EventLog{SessionId: ev.SessionId, FirstSeq: ev.Seq}
			logs = append(logs, cur)
		}
		cur.Count++
		cur.LastSeq = ev.Seq
	}
	for _, l := range logs {
		if err := tx.Insert(tableEventLogs, l); err != nil {
			return err
		}
	}
	return nil
}
