package schedule

import (
	"time"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// MissedAfter is how late a slot may be decided and still count as on
// time: a slot older than that when the leader decides it was missed
// while no leader ran, and the catch-up policy says what becomes of it. A
// change of leader takes seconds, so a takeover alone misses no slot.
const MissedAfter = time.Minute

// MaxCatchUp bounds the missed slots catch-up "all" runs: the latest ones.
const MaxCatchUp = 100

// SpecOf is the spec of a stored schedule.
func SpecOf(sch *fsmpb.Schedule) (*Spec, error) {
	return Parse(sch.Cron, sch.TimeZone, sch.IntervalMs, sch.AnchorMs)
}

// SessionID is the id of the session of slot slotMs of schedule id in a
// cluster of partitions: the first of fsm.ScheduleSessionID's candidates
// that lives in partition 0, which holds the schedules.
func SessionID(id string, slotMs int64, partitions int, taken func(string) bool) string {
	for n := 0; ; n++ {
		c := fsm.ScheduleSessionID(id, slotMs, n)
		if wirerules.PartitionOf(c, partitions) == 0 && (taken == nil || !taken(c)) {
			return c
		}
	}
}

// Decide is the FireScheduleSlot the leader proposes at nowMs for a
// schedule whose next slot came due (nil when it is not due). The slot
// decided is always the schedule's next one, so a repeat of the decision
// changes nothing; slots missed (older than MissedAfter) follow the
// catch-up policy, on-time ones run.
func Decide(sch *fsmpb.Schedule, spec *Spec, nowMs int64, partitions int, epoch uint64) *fsmpb.FireScheduleSlot {
	s0 := sch.NextSlotMs
	if sch.Paused || s0 == 0 || s0 > nowMs {
		return nil
	}
	c := &fsmpb.FireScheduleSlot{Epoch: epoch, ScheduleId: sch.Id, SlotMs: s0}
	run := func(slot int64) {
		c.RunSlotMs = slot
		c.SessionId = SessionID(sch.Id, slot, partitions, nil)
	}
	cutoff := nowMs - MissedAfter.Milliseconds()
	if s0 >= cutoff {
		run(s0)
		c.NextSlotMs = nextOrEnd(spec, s0)
		return c
	}
	// missed: s0 .. last, n of them, all before the cutoff; first is the
	// slot after them (on time, or in the future).
	missed := []int64{s0}
	first := nextOrEnd(spec, s0)
	for first < cutoff && len(missed) < MaxCronIterations {
		missed = append(missed, first)
		first = nextOrEnd(spec, first)
	}
	n := uint64(len(missed))
	switch sch.CatchUp {
	case fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_LATEST:
		last := missed[len(missed)-1]
		if first < cutoff {
			// The walk stopped at its bound: skip what it walked, the next
			// decision goes on.
			c.SkippedMissed, c.NextSlotMs = n, first
			return c
		}
		run(last)
		c.SkippedMissed, c.NextSlotMs = n-1, first
	case fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_ALL:
		if first < cutoff || n > MaxCatchUp {
			// Skip all but the latest MaxCatchUp; those run one by one.
			keep := max(0, len(missed)-MaxCatchUp)
			if first < cutoff {
				keep = len(missed)
			}
			if keep > 0 {
				c.SkippedMissed = uint64(keep)
				if keep < len(missed) {
					c.NextSlotMs = missed[keep]
				} else {
					c.NextSlotMs = first
				}
				return c
			}
		}
		run(s0)
		c.NextSlotMs = nextOrEnd(spec, s0)
	default: // skip
		c.SkippedMissed, c.NextSlotMs = n, first
	}
	return c
}

// nextOrEnd is the slot after at, or, for a cron expression that comes no
// more, a time so far ahead that the schedule owes nothing meanwhile.
func nextOrEnd(spec *Spec, at int64) int64 {
	if n := spec.Next(at); n > at {
		return n
	}
	return at + 100*365*24*time.Hour.Milliseconds()
}
