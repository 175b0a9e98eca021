package fsm

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Schedules (docs/schedules.md). A schedule row holds a spec the API
// validated, a session template, its overlap and catch-up policies and
// the slot it owes next. Apply never parses the spec nor reads a clock:
// the leader computes slot times and FireScheduleSlot carries them, so
// every node computes the same state whatever its clock or zone database.
// FireScheduleSlot applies only when its slot is the one the row owes, and
// moves the row on to the next, so a repeat of it (a new leader proposing
// a slot the old one committed) changes nothing: each slot is decided once.

// ScheduleLogVersion is the log version that brought the schedule
// commands: a leader writes them only once every member applies them.
const ScheduleLogVersion = 5

// Bounds of the schedules a cluster holds.
const (
	MaxSchedules = 1000
	// MaxScheduleBytes bounds one schedule row (its template's message
	// and labels are most of it).
	MaxScheduleBytes = 64 << 10
	// MaxScheduleLabels leaves room for the two labels each slot's
	// session gets on top of the template's.
	MaxScheduleLabels = MaxLabels - 2
)

// The labels each session a schedule starts gets: the schedule's id and
// the slot's time (unix ms).
const (
	ScheduleLabel     = "dex.schedule"
	ScheduleSlotLabel = "dex.slot"
)

// ScheduleSessionID is the id of the session of slot slotMs of a
// schedule, the n-th candidate (n from 0): the leader takes the first
// candidate that lives in the schedule's partition. The same (schedule,
// slot) always gives the same ids, so a slot's session is found by id.
func ScheduleSessionID(scheduleID string, slotMs int64, n int) string {
	id := scheduleID + "-" + strconv.FormatInt(slotMs, 10)
	if n > 0 {
		id += "-" + strconv.Itoa(n)
	}
	return id
}

// Schedule returns a schedule, or nil.
func (s *State) Schedule(id string) *fsmpb.Schedule { return s.tx.Schedule(id) }

// Schedules returns every schedule, by id.
func (s *State) Schedules() []*fsmpb.Schedule {
	return store.All[*fsmpb.Schedule](s.tx, store.TableSchedules, store.IndexID)
}

// DueSchedules returns the schedules that owe a slot, earliest first,
// through their index: no paused schedule is read.
func (s *State) DueSchedules() []*fsmpb.Schedule {
	return store.All[*fsmpb.Schedule](s.tx, store.TableSchedules, store.IndexScheduleDue)
}

// ScheduleCount is how many schedules the state holds.
func (s *State) ScheduleCount() int { return s.tx.Count(store.TableSchedules) }

// ScheduleDue is when the leader owes a schedule its next slot (ok false
// when paused).
func ScheduleDue(sch *fsmpb.Schedule) (int64, bool) { return store.ScheduleDue(sch) }

// SessionActive reports whether a session is under way (running or
// waiting): the overlap policy's test of the previous slot's session.
func SessionActive(s *fsmpb.Session) bool {
	if s == nil || hidden(s) {
		return false
	}
	return s.Status == fsmpb.SessionStatus_SESSION_STATUS_RUNNING || s.Status == fsmpb.SessionStatus_SESSION_STATUS_WAITING
}

// CheckScheduleRow refuses a schedule row that Apply must not store: what
// needs no state. The API checked the spec itself (a cron it parsed, a
// zone it loaded); this is the rules' share.
func CheckScheduleRow(sch *fsmpb.Schedule) *Rejection {
	if sch == nil {
		return reject(CodeInvalid, "a schedule is required")
	}
	if r := CheckID("schedule id", sch.Id); r != nil {
		return r
	}
	switch {
	case (sch.Cron == "") == (sch.IntervalMs == 0):
		return reject(CodeInvalid, "schedule %s: give a cron expression or an interval, one of them", sch.Id)
	case sch.IntervalMs < 0:
		return reject(CodeInvalid, "schedule %s: the interval must be positive, not %dms", sch.Id, sch.IntervalMs)
	case sch.Cron == "" && sch.TimeZone != "":
		return reject(CodeInvalid, "schedule %s: a time zone goes with a cron expression, not an interval", sch.Id)
	case !sch.Paused && sch.NextSlotMs <= 0:
		return reject(CodeInvalid, "schedule %s: its first slot is required", sch.Id)
	case sch.Paused && sch.NextSlotMs != 0:
		return reject(CodeInvalid, "schedule %s is paused: it owes no slot", sch.Id)
	case sch.Overlap == fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_UNSPECIFIED || fsmpb.ScheduleOverlap_name[int32(sch.Overlap)] == "":
		return reject(CodeInvalid, "schedule %s: unknown overlap policy %d", sch.Id, sch.Overlap)
	case sch.CatchUp == fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_UNSPECIFIED || fsmpb.ScheduleCatchUp_name[int32(sch.CatchUp)] == "":
		return reject(CodeInvalid, "schedule %s: unknown catch-up policy %d", sch.Id, sch.CatchUp)
	case len(sch.Labels) > MaxScheduleLabels:
		return reject(CodeInvalid, "schedule %s: %d labels given; a schedule holds at most %d (each session it starts gets %s and %s too)",
			sch.Id, len(sch.Labels), MaxScheduleLabels, ScheduleLabel, ScheduleSlotLabel)
	}
	if r := CheckAgent(sch.Agent); r != nil {
		return r
	}
	if r := CheckLabels(sch.Labels); r != nil {
		return r
	}
	for _, l := range sch.Labels {
		if l.Key == ScheduleLabel || l.Key == ScheduleSlotLabel {
			return reject(CodeInvalid, "schedule %s: label %s is set by the schedule on each session it starts", sch.Id, l.Key)
		}
	}
	if n := proto.Size(sch); n > MaxScheduleBytes {
		return reject(CodeResourceExhausted, "schedule %s is %d bytes; a schedule holds at most %d (its message and labels)", sch.Id, n, MaxScheduleBytes)
	}
	return nil
}

func checkPutSchedule(c *fsmpb.PutSchedule) *Rejection {
	if r := CheckScheduleRow(c.Schedule); r != nil {
		return r
	}
	s := c.Schedule
	if s.LastSlotMs != 0 || s.LastSessionId != "" || s.QueuedSlotMs != 0 || s.Started+s.SkippedOverlap+s.SkippedMissed != 0 {
		return reject(CodeInvalid, "schedule %s: a new schedule has decided no slot", s.Id)
	}
	return nil
}

// putSchedule creates a schedule; a taken id or one schedule too many is
// refused.
func (a *applier) putSchedule(c *fsmpb.PutSchedule) *Result {
	if r := checkPutSchedule(c); r != nil {
		return rejected(r)
	}
	if a.tx.Schedule(c.Schedule.Id) != nil {
		return rejected(reject(CodeAlreadyExists, "schedule %q already exists", c.Schedule.Id))
	}
	if n := a.tx.Count(store.TableSchedules); n >= MaxSchedules {
		return rejected(reject(CodeResourceExhausted, "the cluster holds %d schedules, the most it holds: delete one first", n))
	}
	sch := c.Schedule.CloneVT()
	sch.CreatedAtMs, sch.UpdatedAtMs = a.now, a.now
	a.putScheduleRow(sch)
	return &Result{}
}

func (a *applier) putScheduleRow(sch *fsmpb.Schedule) {
	sch.UpdatedAtMs = a.now
	a.insert(store.TableSchedules, sch)
	a.touched.schedule(sch.Id)
}

func (a *applier) schedule(id string) (*fsmpb.Schedule, *Rejection) {
	if r := CheckID("schedule id", id); r != nil {
		return nil, r
	}
	sch := a.tx.Schedule(id)
	if sch == nil {
		return nil, reject(CodeNotFound, "schedule %q not found", id)
	}
	return sch.CloneVT(), nil
}

// setSchedulePaused pauses a schedule (it owes no slot, and a queued slot
// is dropped) or resumes it at the slot the command carries. Pausing a
// paused schedule or resuming a running one changes nothing.
func (a *applier) setSchedulePaused(c *fsmpb.SetSchedulePaused) *Result {
	sch, r := a.schedule(c.ScheduleId)
	if r != nil {
		return rejected(r)
	}
	if sch.Paused == c.Paused {
		return &Result{}
	}
	if c.Paused {
		sch.Paused, sch.NextSlotMs = true, 0
		if sch.QueuedSlotMs != 0 {
			sch.QueuedSlotMs, sch.QueuedSessionId = 0, ""
			sch.SkippedOverlap++
		}
	} else {
		if c.NextSlotMs <= 0 {
			return rejected(reject(CodeInvalid, "schedule %s: a resume carries the next slot", sch.Id))
		}
		sch.Paused, sch.NextSlotMs = false, c.NextSlotMs
	}
	a.putScheduleRow(sch)
	return &Result{}
}

func (a *applier) deleteSchedule(c *fsmpb.DeleteSchedule) *Result {
	sch, r := a.schedule(c.ScheduleId)
	if r != nil {
		return rejected(r)
	}
	a.delete(store.TableSchedules, a.tx.Schedule(sch.Id))
	a.touched.schedule(sch.Id)
	return &Result{}
}

// checkFireSlot refuses a malformed FireScheduleSlot: what needs no state.
func checkFireSlot(c *fsmpb.FireScheduleSlot) *Rejection {
	if r := CheckID("schedule id", c.ScheduleId); r != nil {
		return r
	}
	if c.SlotMs <= 0 {
		return reject(CodeInvalid, "schedule %s: the slot is required", c.ScheduleId)
	}
	if c.RunSlotMs != 0 || c.FromQueue || c.Manual {
		if r := CheckID("session id", c.SessionId); r != nil {
			return r
		}
	}
	switch {
	case c.Manual && c.FromQueue:
		return reject(CodeInvalid, "schedule %s: a slot is manual or queued, not both", c.ScheduleId)
	case c.Manual || c.FromQueue:
		if c.RunSlotMs != 0 || c.SkippedMissed != 0 || c.NextSlotMs != 0 {
			return reject(CodeInvalid, "schedule %s: a manual or queued slot starts its session and moves no slot on", c.ScheduleId)
		}
	case c.NextSlotMs <= c.SlotMs:
		return reject(CodeInvalid, "schedule %s: the next slot %d must come after slot %d", c.ScheduleId, c.NextSlotMs, c.SlotMs)
	case c.RunSlotMs != 0 && (c.RunSlotMs < c.SlotMs || c.RunSlotMs >= c.NextSlotMs):
		return reject(CodeInvalid, "schedule %s: the slot run (%d) lies outside slots %d to %d", c.ScheduleId, c.RunSlotMs, c.SlotMs, c.NextSlotMs)
	case c.RunSlotMs == 0 && c.SkippedMissed == 0:
		return reject(CodeInvalid, "schedule %s: slot %d neither runs nor is skipped", c.ScheduleId, c.SlotMs)
	}
	return nil
}

// fireScheduleSlot decides the slot the schedule owes, once: it skips the
// missed slots the command counts, decides the run slot by the overlap
// policy and moves the schedule on to next_slot_ms. A slot the schedule no
// longer owes is refused and changes nothing.
func (a *applier) fireScheduleSlot(c *fsmpb.FireScheduleSlot) *Result {
	sch, r := a.schedule(c.ScheduleId)
	if r != nil {
		return rejected(r)
	}
	switch {
	case c.Manual:
		if a.storedSession(c.SessionId) != nil {
			return rejected(reject(CodeAlreadyExists, "session %q already exists", c.SessionId))
		}
		res := a.startSlot(sch, c.SlotMs, c.SessionId, "manual")
		a.putScheduleRow(sch)
		return res
	case c.FromQueue:
		if sch.QueuedSlotMs == 0 || sch.QueuedSlotMs != c.SlotMs || sch.QueuedSessionId != c.SessionId {
			return rejected(reject(CodeFailedPrecondition, "schedule %s has no queued slot %d", sch.Id, c.SlotMs))
		}
		if SessionActive(a.tx.Session(sch.LastSessionId)) {
			return rejected(reject(CodeFailedPrecondition, "schedule %s: session %s of its previous slot is still under way", sch.Id, sch.LastSessionId))
		}
		sch.QueuedSlotMs, sch.QueuedSessionId = 0, ""
		res := a.startSlot(sch, c.SlotMs, c.SessionId, "queued")
		a.putScheduleRow(sch)
		return res
	}
	if sch.Paused || sch.NextSlotMs != c.SlotMs {
		return rejected(reject(CodeFailedPrecondition, "schedule %s does not owe slot %d (its next slot is %d): it was decided already", sch.Id, c.SlotMs, sch.NextSlotMs))
	}
	res := &Result{}
	if c.SkippedMissed > 0 {
		sch.SkippedMissed += c.SkippedMissed
		sch.LastOutcome = fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_SKIPPED_MISSED
		sch.LastSlotMs = c.SlotMs
	}
	if c.RunSlotMs != 0 {
		res = a.runSlot(sch, c.RunSlotMs, c.SessionId)
	}
	sch.NextSlotMs = c.NextSlotMs
	a.putScheduleRow(sch)
	return res
}

// runSlot decides one slot by the overlap policy: start its session, skip
// it, or queue it behind the previous slot's session.
func (a *applier) runSlot(sch *fsmpb.Schedule, slot int64, sessionID string) *Result {
	sch.LastSlotMs = slot
	if SessionActive(a.tx.Session(sch.LastSessionId)) {
		switch sch.Overlap {
		case fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_SKIP:
			sch.SkippedOverlap++
			sch.LastOutcome = fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_SKIPPED_OVERLAP
			return &Result{}
		case fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE:
			if sch.QueuedSlotMs != 0 {
				// One slot waits at most: a later one is skipped.
				sch.SkippedOverlap++
				sch.LastOutcome = fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_SKIPPED_OVERLAP
				return &Result{}
			}
			sch.QueuedSlotMs, sch.QueuedSessionId = slot, sessionID
			sch.LastOutcome = fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_QUEUED
			return &Result{}
		}
	}
	return a.startSlot(sch, slot, sessionID, "slot")
}

// startSlot creates the session of a slot from the schedule's template. A
// session id taken by another session skips the slot: its session is not
// this schedule's to start.
func (a *applier) startSlot(sch *fsmpb.Schedule, slot int64, sessionID, how string) *Result {
	labels := make([]*fsmpb.Label, 0, len(sch.Labels)+2)
	for _, l := range sch.Labels {
		labels = append(labels, l.CloneVT())
	}
	labels = append(labels,
		&fsmpb.Label{Key: ScheduleLabel, Value: sch.Id},
		&fsmpb.Label{Key: ScheduleSlotLabel, Value: strconv.FormatInt(slot, 10)})
	c := &fsmpb.CreateSession{SessionId: sessionID, Agent: sch.Agent, Provider: sch.Provider, Labels: labels}
	if sch.Message != "" {
		c.Message, c.MessageId = sch.Message, sessionID+"/first"
	}
	res := a.createSession(c)
	if res.Err != nil {
		// The slot is decided all the same (skipped), so the command is
		// applied, not refused: the schedule moves on.
		sch.LastOutcome = fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_SKIPPED_ID_TAKEN
		return &Result{}
	}
	a.emit(sessionID, "session_scheduled", "", fmt.Sprintf("schedule %s, %s %d", sch.Id, how, slot))
	sch.Started++
	sch.LastSessionId = sessionID
	if how != "manual" {
		sch.LastOutcome = fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_STARTED
	}
	return res
}

// SessionIDTaken reports whether a session id is held by any row: a
// session, one being imported, or one deleted whose rows are still being
// removed.
func (s *State) SessionIDTaken(id string) bool { return s.tx.Session(id) != nil }
