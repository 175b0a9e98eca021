package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

func TestParse_RefusesBadSpecs(t *testing.T) {
	for _, tc := range []struct {
		cron, zone string
		interval   int64
		says       string
	}{
		{"", "", 0, "cron expression or an interval"},
		{"* * * * *", "", 1000, "not both"},
		{"", "", -1, "positive"},
		{"", "", 999, "at least"},
		{"", "UTC", 1000, "time zone"},
		{"61 * * * *", "", 0, "bad cron expression"},
		{"* * * *", "", 0, "bad cron expression"},
		{"@every 5m", "", 0, "@every"},
		{"TZ=UTC * * * * *", "", 0, "time zone"},
		{"0 9 * * *", "Nowhere/City", 0, "unknown time zone"},
		{"0 0 30 2 *", "", 0, "never fires"},
	} {
		_, err := Parse(tc.cron, tc.zone, tc.interval, 0)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Parse(%q, %q, %d): %v; want an error saying %q", tc.cron, tc.zone, tc.interval, err, tc.says)
		}
	}
}

// A cron expression's slots are its zone's wall-clock times, across a
// daylight saving change; an interval's are its anchor plus whole
// intervals.
func TestNext_CronInAZoneAndIntervals(t *testing.T) {
	paris, _ := time.LoadLocation("Europe/Paris")
	s, err := Parse("0 9 * * *", "Europe/Paris", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The last Sunday of March 2026 is the 29th: Paris goes to UTC+2.
	at := time.Date(2026, 3, 28, 12, 0, 0, 0, paris).UnixMilli()
	next := s.Next(at)
	if got := time.UnixMilli(next).In(paris); got.Day() != 29 || got.Hour() != 9 || time.UnixMilli(next).UTC().Hour() != 7 {
		t.Fatalf("next after the 28th noon: %v (UTC %v); want the 29th 09:00 Paris, 07:00 UTC", got, time.UnixMilli(next).UTC())
	}
	if prev := s.Next(at - 24*time.Hour.Milliseconds()); time.UnixMilli(prev).UTC().Hour() != 8 {
		t.Fatalf("before the change 09:00 Paris is 08:00 UTC, got %v", time.UnixMilli(prev).UTC())
	}
	iv, _ := Parse("", "", 1500, 10_000)
	for _, c := range []struct{ at, want int64 }{{0, 10_000}, {10_000, 11_500}, {11_499, 11_500}, {11_500, 13_000}} {
		if got := iv.Next(c.at); got != c.want {
			t.Errorf("interval Next(%d) = %d; want %d", c.at, got, c.want)
		}
	}
}

func sched(catchUp fsmpb.ScheduleCatchUp, next int64) *fsmpb.Schedule {
	return &fsmpb.Schedule{Id: "s", IntervalMs: 1000, AnchorMs: 0, NextSlotMs: next, CatchUp: catchUp,
		Overlap: fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_ALLOW}
}

// An on-time (or a few seconds late) slot runs; a slot not come yet or a
// paused schedule gives nothing.
func TestDecide_OnTime(t *testing.T) {
	spec, _ := Parse("", "", 1000, 0)
	now := int64(1_000_000)
	c := Decide(sched(fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP, now-5000), spec, now, 1, 7)
	if c.SlotMs != now-5000 || c.RunSlotMs != now-5000 || c.NextSlotMs != now-4000 || c.SkippedMissed != 0 || c.Epoch != 7 ||
		c.SessionId != fsm.ScheduleSessionID("s", now-5000, 0) {
		t.Fatalf("a slot 5s late: %v; want it run", c)
	}
	if c := Decide(sched(fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP, now+1), spec, now, 1, 7); c != nil {
		t.Fatalf("a slot to come: %v", c)
	}
	p := sched(fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP, 0)
	p.Paused = true
	if c := Decide(p, spec, now, 1, 7); c != nil {
		t.Fatalf("a paused schedule: %v", c)
	}
}

// Slots missed while no leader ran follow the catch-up policy.
func TestDecide_CatchUpPolicies(t *testing.T) {
	spec, _ := Parse("", "", 1000, 0)
	late := MissedAfter.Milliseconds()
	now := int64(10_000_000)
	s0 := now - late - 10_000 // 10 slots missed (s0 .. s0+9000), then on-time ones
	first := s0 + 10_000      // the first slot not missed
	skip := Decide(sched(fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP, s0), spec, now, 1, 1)
	if skip.RunSlotMs != 0 || skip.SkippedMissed != 10 || skip.NextSlotMs != first {
		t.Fatalf("skip: %v; want 10 skipped, next %d", skip, first)
	}
	latest := Decide(sched(fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_LATEST, s0), spec, now, 1, 1)
	if latest.RunSlotMs != s0+9000 || latest.SkippedMissed != 9 || latest.NextSlotMs != first {
		t.Fatalf("latest: %v; want slot %d run, 9 skipped", latest, s0+9000)
	}
	all := Decide(sched(fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_ALL, s0), spec, now, 1, 1)
	if all.RunSlotMs != s0 || all.SkippedMissed != 0 || all.NextSlotMs != s0+1000 {
		t.Fatalf("all: %v; want the first missed slot run", all)
	}
	// all, beyond the bound: the oldest are skipped, the latest MaxCatchUp run.
	s0 = now - late - 150_000
	all = Decide(sched(fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_ALL, s0), spec, now, 1, 1)
	if all.RunSlotMs != 0 || all.SkippedMissed != 50 || all.NextSlotMs != s0+50_000 {
		t.Fatalf("all over the bound: %v; want 50 skipped", all)
	}
}

// The slot's session id lives in partition 0, where schedules live.
func TestSessionID_LivesInPartitionZero(t *testing.T) {
	for slot := int64(1); slot <= 50; slot++ {
		id := SessionID("s", slot*1000, 4, nil)
		if wirerules.PartitionOf(id, 4) != 0 || !strings.HasPrefix(id, fsm.ScheduleSessionID("s", slot*1000, 0)) {
			t.Fatalf("slot %d: id %s in partition %d", slot, id, wirerules.PartitionOf(id, 4))
		}
		if again := SessionID("s", slot*1000, 4, nil); again != id {
			t.Fatalf("slot %d: ids %s then %s", slot, id, again)
		}
	}
	taken := fsm.ScheduleSessionID("s", 1000, 0)
	if id := SessionID("s", 1000, 1, func(id string) bool { return id == taken }); id == taken {
		t.Fatalf("a taken id was drawn")
	}
}
