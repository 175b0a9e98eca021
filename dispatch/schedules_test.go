package dispatch_test

import (
	"testing"
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

func putSchedule(f *fixture, s *fsmpb.Schedule) {
	f.t.Helper()
	f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_PutSchedule{PutSchedule: &fsmpb.PutSchedule{Schedule: s}}})
}

// The wheel fires each slot once as it comes, and one that came while no
// leader ran when the next leader starts; a second takeover fires nothing
// again. With queue_one, the slot that overlapped starts once the previous
// slot's session ends.
func TestScheduleSlotsFireOnceAndTheQueuedOneStartsWhenThePreviousEnds(t *testing.T) {
	clock := leasetest.NewClock()
	f := newFixture(t, options{clock: clock, noEstablish: true})
	f.epoch = f.c.BumpEpoch()
	now := clock.Now().UnixMilli()
	putSchedule(f, &fsmpb.Schedule{Id: "q", IntervalMs: 60_000, AnchorMs: now, NextSlotMs: now + 60_000, Message: "go",
		Overlap: fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE, CatchUp: fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP})
	clock.Advance(90 * time.Second) // the first slot came while no leader ran
	f.establish()
	first := fsm.ScheduleSessionID("q", now+60_000, 0)
	leasetest.Eventually(t, "the first slot starts", func() bool { return f.c.State().Session(first) != nil })

	clock.Advance(time.Minute)
	f.c.CreateSession("poke", "") // a state change wakes the delay heap's reader
	leasetest.Eventually(t, "the second slot queued", func() bool { return f.c.State().Schedule("q").QueuedSlotMs == now+120_000 })
	second := fsm.ScheduleSessionID("q", now+120_000, 0)
	if f.c.State().Session(second) != nil {
		t.Fatal("the queued slot started while the first slot's session runs")
	}
	f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{SessionId: first, By: "test", Reason: "done"}}})
	leasetest.Eventually(t, "the queued slot starts", func() bool { return f.c.State().Session(second) != nil })

	f.leader.RevokeLeadership()
	f.establish()
	f.c.CreateSession("poke2", "")
	time.Sleep(100 * time.Millisecond)
	// Three decisions: the first slot run, the second queued, the queued
	// one started; none proposed again after the takeover.
	if s, n := f.c.State().Schedule("q"), f.c.Count("FireScheduleSlot"); s.Started != 2 || n != 3 {
		t.Fatalf("schedule %v after a takeover, %d FireScheduleSlot proposals; want 2 started of 3 proposals", s, n)
	}
}
