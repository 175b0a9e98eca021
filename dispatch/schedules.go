package dispatch

import (
	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/schedule"
)

// The broker's share of schedules (docs/schedules.md): a running
// schedule's next slot sits in the delay heap like a timer and becomes
// owed when it comes; a queued slot becomes owed when the session it
// waits for is no longer under way. Both are fed from what Apply wrote
// (the schedules and sessions of fsm.Applied), never by a scan of the
// schedules; only the load at the start of a term reads them.

// loadSchedulesLocked loads the due schedules through their index, and
// the queued slots. It returns how many rows it placed.
func (b *Broker) loadSchedulesLocked(st *fsm.State, now int64) int {
	n := 0
	for _, sch := range st.DueSchedules() {
		b.updateScheduleLocked(st, sch.Id, sch, now)
		n++
	}
	// Queued slots are few (one per schedule at most, and the schedules
	// are bounded): this read happens once a term.
	for _, sch := range st.Schedules() {
		if sch.QueuedSlotMs != 0 {
			b.updateScheduleLocked(st, sch.Id, sch, now)
			n++
		}
	}
	return n
}

// updateScheduleLocked places a schedule as the state has it now (nil:
// deleted): its next slot in the delay heap, its queued slot waiting on
// its session or owed.
func (b *Broker) updateScheduleLocked(st *fsm.State, id string, sch *fsmpb.Schedule, now int64) {
	b.unschedule(dueSchedule, id)
	b.unschedule(dueQueued, id)
	if s, ok := b.queuedWait[id]; ok {
		delete(b.queuedOn, s)
		delete(b.queuedWait, id)
	}
	if at, ok := fsm.ScheduleDue(sch); ok {
		b.schedule(due{dueSchedule, id, at}, nil, now)
	}
	if sch == nil || sch.QueuedSlotMs == 0 {
		return
	}
	if sch.LastSessionId == "" {
		b.dueNow(due{dueQueued, id, 0}, nil)
		return
	}
	b.queuedOn[sch.LastSessionId], b.queuedWait[id] = id, sch.LastSessionId
	b.sessionEndedLocked(sch.LastSessionId, st.Session(sch.LastSessionId))
}

// sessionEndedLocked makes the queued slot waiting on session id owed
// while that session is not under way, and takes it back when the session
// runs again before the slot started (a new message): the wait goes on
// until the schedule is written (the slot started, or dropped by a pause).
func (b *Broker) sessionEndedLocked(id string, s *fsmpb.Session) {
	sched, ok := b.queuedOn[id]
	if !ok {
		return
	}
	if fsm.SessionActive(s) {
		b.unschedule(dueQueued, sched)
		return
	}
	b.dueNow(due{dueQueued, sched, 0}, nil)
}

// scheduleFire is the FireScheduleSlot the wheel owes for o, from the
// newest state (nil: nothing is owed any more).
func (t *Timers) scheduleFire(o due, nowMs int64, epoch uint64, log *zap.Logger) *fsmpb.FireScheduleSlot {
	sch := t.src.State().Schedule(o.id)
	if sch == nil {
		return nil
	}
	if o.kind == dueQueued {
		if sch.QueuedSlotMs == 0 {
			return nil
		}
		return &fsmpb.FireScheduleSlot{Epoch: epoch, ScheduleId: sch.Id, SlotMs: sch.QueuedSlotMs, SessionId: sch.QueuedSessionId, FromQueue: true}
	}
	spec, err := schedule.SpecOf(sch)
	if err != nil {
		// The API checked the spec; a node whose zone database lacks the
		// zone cannot compute its slots. Another leader may.
		log.Error("a schedule's spec does not parse on this node: its slots wait for a leader that reads it", zap.String("schedule", sch.Id), zap.Error(err))
		return nil
	}
	return schedule.Decide(sch, spec, nowMs, t.cfg.Partitions, epoch)
}
