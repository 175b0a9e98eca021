package fsm

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// intervalSchedule is a running schedule of an interval whose first slot
// is anchor + interval, with skip policies.
func intervalSchedule(id string, anchor, interval int64) *fsmpb.Schedule {
	return &fsmpb.Schedule{
		Id: id, IntervalMs: interval, AnchorMs: anchor, NextSlotMs: anchor + interval,
		Agent: "", Message: "run the report", Labels: lbl("team", "ops"),
		Overlap: fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_SKIP, CatchUp: fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP,
	}
}

func putScheduleCmd(s *fsmpb.Schedule) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_PutSchedule{PutSchedule: &fsmpb.PutSchedule{Schedule: s}}}
}

func pauseCmd(id string, paused bool, next int64) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_SetSchedulePaused{SetSchedulePaused: &fsmpb.SetSchedulePaused{ScheduleId: id, Paused: paused, NextSlotMs: next}}}
}

func deleteScheduleCmd(id string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_DeleteSchedule{DeleteSchedule: &fsmpb.DeleteSchedule{ScheduleId: id}}}
}

// fireCmd decides slot, running run (0: none) and moving on to next.
func (d *driver) fireCmd(id string, slot, run, next int64) *fsmpb.Command {
	c := &fsmpb.FireScheduleSlot{Epoch: d.epoch, ScheduleId: id, SlotMs: slot, RunSlotMs: run, NextSlotMs: next}
	if run != 0 {
		c.SessionId = ScheduleSessionID(id, run, 0)
	}
	return &fsmpb.Command{Body: &fsmpb.Command_FireScheduleSlot{FireScheduleSlot: c}}
}

func (d *driver) scheduleRow(id string) *fsmpb.Schedule {
	d.t.Helper()
	s := d.f.State().Schedule(id)
	if s == nil {
		d.t.Fatalf("schedule %s not found", id)
	}
	return s
}

// slotSessions counts the sessions of each slot of a schedule, by the
// labels each gets.
func slotSessions(d *driver, id string) map[string]int {
	page, _ := d.f.State().ListSessions(store.SessionFilter{Labels: lbl(ScheduleLabel, id)}, store.ListByCreated, false, nil, 1000)
	out := map[string]int{}
	for _, s := range page {
		for _, l := range s.Labels {
			if l.Key == ScheduleSlotLabel {
				out[l.Value]++
			}
		}
	}
	return out
}

// A slot starts its session once: the same FireScheduleSlot proposed again
// (a new leader re-proposing what the old one committed) is refused and
// changes nothing, and the session carries the template and the labels.
func TestSchedule_EachSlotStartsOnceWhateverTheRepeats(t *testing.T) {
	d := newDriver(t)
	d.do(putScheduleCmd(intervalSchedule("rep", d.now, 1000)))
	slot := d.now + 1000
	fire := d.fireCmd("rep", slot, slot, slot+1000)
	d.do(fire)
	d.newEpoch() // a takeover
	again := d.fireCmd("rep", slot, slot, slot+1000)
	if r := d.refused(again, CodeFailedPrecondition); r == nil {
		t.Fatal("a repeat was not refused")
	}
	// The old leader's epoch is refused too.
	d.refused(fire, CodeFailedPrecondition)
	id := ScheduleSessionID("rep", slot, 0)
	s := d.session(id)
	if s.Status != fsmpb.SessionStatus_SESSION_STATUS_RUNNING {
		t.Fatalf("slot session is %s; want running its first turn", StatusName(s.Status))
	}
	want := map[string]string{"team": "ops", ScheduleLabel: "rep", ScheduleSlotLabel: strconv.FormatInt(slot, 10)}
	for _, l := range s.Labels {
		if want[l.Key] != l.Value {
			t.Errorf("label %s=%s; want %q", l.Key, l.Value, want[l.Key])
		}
		delete(want, l.Key)
	}
	if len(want) > 0 {
		t.Errorf("labels missing: %v", want)
	}
	if got := slotSessions(d, "rep"); len(got) != 1 || got[strconv.FormatInt(slot, 10)] != 1 {
		t.Fatalf("sessions per slot %v; want one of slot %d", got, slot)
	}
	row := d.scheduleRow("rep")
	if row.NextSlotMs != slot+1000 || row.Started != 1 || row.LastSessionId != id || row.LastOutcome != fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_STARTED {
		t.Fatalf("schedule after the fire: %v", row)
	}
}

// Two machines fed the same commands end byte-identical, in batches too:
// Apply reads no clock.
func TestSchedule_Deterministic(t *testing.T) {
	d := newDriver(t)
	d.twin, d.twinBatch = New(Options{}), 3
	var buf bytes.Buffer
	if err := d.f.Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if err := d.twin.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	d.batchTwin, d.batchIndex = New(Options{}), d.index
	if err := d.batchTwin.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	d.do(putScheduleCmd(intervalSchedule("det", d.now, 1000)))
	base := d.now
	for i := int64(1); i <= 7; i++ {
		d.advance(time.Second)
		d.try(d.fireCmd("det", base+i*1000, base+i*1000, base+(i+1)*1000))
		d.try(d.fireCmd("det", base+i*1000, base+i*1000, base+(i+1)*1000)) // refused
	}
	d.do(pauseCmd("det", true, 0))
	d.flushTwin()
	if a, b := persist(t, d.f), persist(t, d.twin); !bytes.Equal(a, b) {
		t.Fatal("the twin fed the same log in batches ended in another state")
	}
	d.flushBatchTwin()
	if a, b := batchedState(t, d.f), batchedState(t, d.batchTwin); !bytes.Equal(a, b) {
		t.Fatal("a state machine fed the same commands in Batch entries holds a different state")
	}
}

// Overlap skip: a slot whose previous session is still under way is
// recorded as skipped and starts nothing; once that session is idle the
// next slot starts.
func TestSchedule_OverlapSkip(t *testing.T) {
	d := newDriver(t)
	d.do(putScheduleCmd(intervalSchedule("ov", d.now, 1000)))
	b := d.now
	d.do(d.fireCmd("ov", b+1000, b+1000, b+2000))
	d.do(d.fireCmd("ov", b+2000, b+2000, b+3000))
	row := d.scheduleRow("ov")
	if row.SkippedOverlap != 1 || row.Started != 1 || row.LastOutcome != fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_SKIPPED_OVERLAP {
		t.Fatalf("after an overlapping slot: %v", row)
	}
	d.startNext(ScheduleSessionID("ov", b+1000, 0), kRunModel).answer("done")
	d.do(d.fireCmd("ov", b+3000, b+3000, b+4000))
	if got := slotSessions(d, "ov"); len(got) != 2 || got[strconv.FormatInt(b+2000, 10)] != 0 {
		t.Fatalf("sessions per slot %v; want slots 1 and 3", got)
	}
}

// Overlap queue_one: one slot waits for the previous one's session and
// starts when it ends; a further slot meanwhile is skipped.
func TestSchedule_OverlapQueueOne(t *testing.T) {
	d := newDriver(t)
	sch := intervalSchedule("q", d.now, 1000)
	sch.Overlap = fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE
	d.do(putScheduleCmd(sch))
	b := d.now
	d.do(d.fireCmd("q", b+1000, b+1000, b+2000))
	d.do(d.fireCmd("q", b+2000, b+2000, b+3000))
	d.do(d.fireCmd("q", b+3000, b+3000, b+4000))
	row := d.scheduleRow("q")
	queuedID := ScheduleSessionID("q", b+2000, 0)
	if row.QueuedSlotMs != b+2000 || row.QueuedSessionId != queuedID || row.SkippedOverlap != 1 {
		t.Fatalf("after two overlapping slots: %v", row)
	}
	fromQueue := &fsmpb.Command{Body: &fsmpb.Command_FireScheduleSlot{FireScheduleSlot: &fsmpb.FireScheduleSlot{
		Epoch: d.epoch, ScheduleId: "q", SlotMs: b + 2000, SessionId: queuedID, FromQueue: true}}}
	// Refused while the previous session runs.
	d.refused(fromQueue, CodeFailedPrecondition)
	d.startNext(ScheduleSessionID("q", b+1000, 0), kRunModel).answer("done")
	d.do(fromQueue)
	d.refused(fromQueue, CodeFailedPrecondition) // once
	row = d.scheduleRow("q")
	if row.QueuedSlotMs != 0 || row.LastSessionId != queuedID || row.Started != 2 {
		t.Fatalf("after the queued slot started: %v", row)
	}
}

// Overlap allow: every slot starts whatever the previous one does.
func TestSchedule_OverlapAllow(t *testing.T) {
	d := newDriver(t)
	sch := intervalSchedule("al", d.now, 1000)
	sch.Overlap = fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_ALLOW
	d.do(putScheduleCmd(sch))
	b := d.now
	for i := int64(1); i <= 3; i++ {
		d.do(d.fireCmd("al", b+i*1000, b+i*1000, b+(i+1)*1000))
	}
	if got := slotSessions(d, "al"); len(got) != 3 {
		t.Fatalf("sessions per slot %v; want 3", got)
	}
}

// Catch-up: a decision that skips missed slots counts them and starts
// nothing; one that runs the latest missed slot starts that one only.
func TestSchedule_CatchUpSkippedAndLatest(t *testing.T) {
	d := newDriver(t)
	d.do(putScheduleCmd(intervalSchedule("cu", d.now, 1000)))
	b := d.now
	// skip: slots 1..5 missed, next is 6.
	d.do(withSkipped(d.fireCmd("cu", b+1000, 0, b+6000), 5))
	row := d.scheduleRow("cu")
	if row.SkippedMissed != 5 || row.Started != 0 || row.NextSlotMs != b+6000 || row.LastOutcome != fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_SKIPPED_MISSED {
		t.Fatalf("after skipping missed slots: %v", row)
	}
	// latest: slots 6..9 missed, 9 runs.
	d.do(withSkipped(d.fireCmd("cu", b+6000, b+9000, b+10000), 3))
	if got := slotSessions(d, "cu"); len(got) != 1 || got[strconv.FormatInt(b+9000, 10)] != 1 {
		t.Fatalf("sessions per slot %v; want slot 9 only", got)
	}
	if row := d.scheduleRow("cu"); row.SkippedMissed != 8 || row.Started != 1 {
		t.Fatalf("after running the latest: %v", row)
	}
}

func withSkipped(c *fsmpb.Command, n uint64) *fsmpb.Command {
	c.GetFireScheduleSlot().SkippedMissed = n
	return c
}

// Pause: the schedule owes no slot, a fire is refused; resume at the slot
// the command carries; delete removes the row and keeps the sessions.
func TestSchedule_PauseResumeDelete(t *testing.T) {
	d := newDriver(t)
	d.do(putScheduleCmd(intervalSchedule("pr", d.now, 1000)))
	b := d.now
	d.do(d.fireCmd("pr", b+1000, b+1000, b+2000))
	d.do(pauseCmd("pr", true, 0))
	if due := d.f.State().DueSchedules(); len(due) != 0 {
		t.Fatalf("a paused schedule is due: %v", due)
	}
	d.refused(d.fireCmd("pr", b+2000, b+2000, b+3000), CodeFailedPrecondition)
	before := d.stateBytes()
	d.do(pauseCmd("pr", true, 0)) // again: nothing changes but the index
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("pausing a paused schedule changed it")
	}
	d.refused(pauseCmd("pr", false, 0), CodeInvalid)
	d.do(pauseCmd("pr", false, b+9000))
	if due := d.f.State().DueSchedules(); len(due) != 1 || due[0].NextSlotMs != b+9000 {
		t.Fatalf("due after the resume: %v", due)
	}
	d.do(deleteScheduleCmd("pr"))
	if d.f.State().Schedule("pr") != nil {
		t.Fatal("schedule still there after delete")
	}
	d.refused(deleteScheduleCmd("pr"), CodeNotFound)
	d.refused(d.fireCmd("pr", b+9000, b+9000, b+10000), CodeNotFound)
	if d.session(ScheduleSessionID("pr", b+1000, 0)) == nil {
		t.Fatal("the slot's session went with the schedule")
	}
}

// A schedule row survives a snapshot and restore, its due index too.
func TestSchedule_SnapshotRestore(t *testing.T) {
	d := newDriver(t)
	d.do(putScheduleCmd(intervalSchedule("snap", d.now, 1000)))
	sch := intervalSchedule("paused", d.now, 1000)
	sch.Paused, sch.NextSlotMs = true, 0
	d.do(putScheduleCmd(sch))
	d.restart()
	if d.f.State().ScheduleCount() != 2 {
		t.Fatalf("%d schedules after restore; want 2", d.f.State().ScheduleCount())
	}
	if due := d.f.State().DueSchedules(); len(due) != 1 || due[0].Id != "snap" {
		t.Fatalf("due after restore: %v", due)
	}
	b := d.scheduleRow("snap").NextSlotMs
	d.do(d.fireCmd("snap", b, b, b+1000))
}

// Bad schedules are refused and change nothing.
func TestSchedule_BadInputRefused(t *testing.T) {
	d := newDriver(t)
	d.do(putScheduleCmd(intervalSchedule("taken", d.now, 1000)))
	mod := func(f func(s *fsmpb.Schedule)) *fsmpb.Command {
		s := intervalSchedule("x", d.now, 1000)
		f(s)
		return putScheduleCmd(s)
	}
	for name, c := range map[string]struct {
		cmd  *fsmpb.Command
		code Code
	}{
		"taken id":        {putScheduleCmd(intervalSchedule("taken", d.now, 1000)), CodeAlreadyExists},
		"bad id":          {mod(func(s *fsmpb.Schedule) { s.Id = "a b" }), CodeInvalid},
		"no spec":         {mod(func(s *fsmpb.Schedule) { s.IntervalMs = 0 }), CodeInvalid},
		"both specs":      {mod(func(s *fsmpb.Schedule) { s.Cron = "* * * * *" }), CodeInvalid},
		"negative":        {mod(func(s *fsmpb.Schedule) { s.IntervalMs = -5 }), CodeInvalid},
		"no first slot":   {mod(func(s *fsmpb.Schedule) { s.NextSlotMs = 0 }), CodeInvalid},
		"no overlap":      {mod(func(s *fsmpb.Schedule) { s.Overlap = 0 }), CodeInvalid},
		"unknown catchup": {mod(func(s *fsmpb.Schedule) { s.CatchUp = 9 }), CodeInvalid},
		"bad agent":       {mod(func(s *fsmpb.Schedule) { s.Agent = "no spaces allowed" }), CodeInvalid},
		"reserved label":  {mod(func(s *fsmpb.Schedule) { s.Labels = append(s.Labels, lbl(ScheduleLabel, "y")...) }), CodeInvalid},
		"too many labels": {mod(func(s *fsmpb.Schedule) {
			for i := range MaxScheduleLabels {
				s.Labels = append(s.Labels, lbl("k"+strconv.Itoa(i), "v")...)
			}
		}), CodeInvalid},
		"too big": {mod(func(s *fsmpb.Schedule) { s.Message = string(bytes.Repeat([]byte("m"), MaxScheduleBytes)) }), CodeResourceExhausted},
	} {
		t.Run(name, func(t *testing.T) { d.refused(c.cmd, c.code) })
	}
	// Malformed fires.
	b := d.now
	d.refused(d.fireCmd("taken", b+1000, b+1000, b+1000), CodeInvalid)            // next not after slot
	d.refused(d.fireCmd("taken", b+1000, b+5000, b+2000), CodeInvalid)            // run outside
	d.refused(d.fireCmd("taken", b+1000, 0, b+2000), CodeInvalid)                 // neither runs nor skips
	d.refused(d.fireCmd("taken", b+5000, b+5000, b+6000), CodeFailedPrecondition) // not the next slot
}

// The count of schedules is bounded.
func TestSchedule_CountBounded(t *testing.T) {
	d := newDriver(t)
	for i := range MaxSchedules {
		d.do(putScheduleCmd(intervalSchedule("s"+strconv.Itoa(i), d.now, 1000)))
	}
	r := d.refused(putScheduleCmd(intervalSchedule("one-more", d.now, 1000)), CodeResourceExhausted)
	if r.Reason == "" {
		t.Fatal("no reason")
	}
}

// A slot whose session id another session took is skipped, not refused:
// the schedule moves on and starts nothing of the other's.
func TestSchedule_SlotIDTakenIsSkipped(t *testing.T) {
	d := newDriver(t)
	d.do(putScheduleCmd(intervalSchedule("tk", d.now, 1000)))
	b := d.now
	d.createSession(ScheduleSessionID("tk", b+1000, 0), "", "")
	d.do(d.fireCmd("tk", b+1000, b+1000, b+2000))
	row := d.scheduleRow("tk")
	if row.LastOutcome != fsmpb.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_SKIPPED_ID_TAKEN || row.Started != 0 || row.NextSlotMs != b+2000 {
		t.Fatalf("after a slot whose id was taken: %v", row)
	}
}

// A manual trigger starts a session now and leaves the next slot alone;
// a trigger whose id is taken is refused.
func TestSchedule_ManualTrigger(t *testing.T) {
	d := newDriver(t)
	sch := intervalSchedule("man", d.now, 1000)
	sch.Paused, sch.NextSlotMs = true, 0
	d.do(putScheduleCmd(sch))
	id := ScheduleSessionID("man", d.now, 0)
	trig := &fsmpb.Command{Body: &fsmpb.Command_FireScheduleSlot{FireScheduleSlot: &fsmpb.FireScheduleSlot{
		Epoch: d.epoch, ScheduleId: "man", SlotMs: d.now, SessionId: id, Manual: true}}}
	d.do(trig)
	d.refused(trig, CodeAlreadyExists)
	row := d.scheduleRow("man")
	if row.Started != 1 || row.NextSlotMs != 0 || row.LastSessionId != id {
		t.Fatalf("after a trigger: %v", row)
	}
}
