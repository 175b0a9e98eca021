package store

import (
	"iter"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Schedules: one row per schedule, keyed by id, and an index of the
// running schedules by their next slot, which the leader's broker loads
// its due schedules from (docs/schedules.md).

// TableSchedules holds the Schedule rows.
const TableSchedules = "schedules"

// IndexScheduleDue orders the schedules that owe a slot by its time.
const IndexScheduleDue = "schedule_due"

var scheduleKey = stringKey[*fsmpb.Schedule]{func(s *fsmpb.Schedule) string { return s.Id }}

var scheduleIndexes = indexes{
	IndexID:          {Unique: true, Indexer: scheduleKey},
	IndexScheduleDue: {AllowMissing: true, Indexer: dueIndexer{due: scheduleDue}},
}

// ScheduleDue is when the leader owes a schedule its next slot (ok false
// when it owes none: paused).
func ScheduleDue(s *fsmpb.Schedule) (int64, bool) {
	if s == nil || s.Paused || s.NextSlotMs == 0 {
		return 0, false
	}
	return s.NextSlotMs, true
}

func scheduleDue(obj any) (int64, bool) {
	s, ok := obj.(*fsmpb.Schedule)
	if !ok {
		return 0, false
	}
	return ScheduleDue(s)
}

// Schedule returns a schedule, or nil.
func (t *Txn) Schedule(id string) *fsmpb.Schedule {
	return lookup[*fsmpb.Schedule](t, TableSchedules, IndexID, id)
}

// Schedules iterates every schedule, by id.
func (t *Txn) Schedules() iter.Seq[*fsmpb.Schedule] {
	return scan[*fsmpb.Schedule](t, TableSchedules, IndexID)
}

// DueSchedules iterates the schedules that owe a slot, earliest first.
func (t *Txn) DueSchedules() iter.Seq[*fsmpb.Schedule] {
	return scan[*fsmpb.Schedule](t, TableSchedules, IndexScheduleDue)
}
