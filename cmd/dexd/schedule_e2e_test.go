//go:build e2e

package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// slotsStarted counts the sessions of each slot of a schedule by the labels
// each gets (dex.schedule, dex.slot).
func slotsStarted(t *testing.T, ctx context.Context, cl *client.Client, schedule string) map[int64]int {
	t.Helper()
	sessions, err := cl.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int{}
	for _, s := range sessions {
		labels := map[string]string{}
		for _, l := range s.Labels {
			labels[l.Key] = l.Value
		}
		if labels["dex.schedule"] != schedule {
			continue
		}
		slot, err := strconv.ParseInt(labels["dex.slot"], 10, 64)
		if err != nil {
			t.Fatalf("session %s has slot label %q", s.Id, labels["dex.slot"])
		}
		out[slot]++
	}
	return out
}

// The leader is SIGKILLed at a schedule's firing moment ten times (at the
// slot's time, a few milliseconds later each round, so the kill lands
// before the fire is proposed, while it commits and after), and restarts:
// every slot from the first to the last decided started exactly one
// session, and none was skipped.
func TestScheduleSlotsStartOnceAcrossLeaderKills(t *testing.T) {
	const interval = 2 * time.Second
	c := newTestCluster(t)
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	conn, err := client.Dial("dex:///" + strings.Join(c.grpc, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := client.New(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Overlap allow: no Worker runs, so each session stays under way and
	// every slot must still start its own.
	created, err := cl.CreateSchedule(ctx, &dexv1.CreateScheduleRequest{
		ScheduleId: "tick", IntervalMs: interval.Milliseconds(), Message: "tick",
		Overlap: dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_ALLOW,
	})
	if err != nil {
		t.Fatal(err)
	}
	first := created.NextSlotMs
	for round := range 10 {
		leader, _ := c.leaderIndex(t)
		sch, err := cl.GetSchedule(ctx, "tick")
		if err != nil {
			t.Fatal(err)
		}
		at := time.UnixMilli(sch.NextSlotMs).Add(time.Duration(round*4) * time.Millisecond)
		time.Sleep(time.Until(at))
		c.procs[leader].kill()
		c.procs[leader] = startDexd(t, c.args(leader)...)
		waitUntil(t, 20*time.Second, "a leader serving the schedule", func() (bool, string) {
			cctx, ccancel := context.WithTimeout(ctx, time.Second)
			defer ccancel()
			_, err := cl.GetSchedule(cctx, "tick")
			return err == nil, errString(err)
		})
	}
	// One more slot is decided by a leader that lives, then the schedule
	// stops.
	sch, err := cl.GetSchedule(ctx, "tick")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the next slot decided", func() (bool, string) {
		now, err := cl.GetSchedule(ctx, "tick")
		return err == nil && now.LastSlotMs >= sch.NextSlotMs, errString(err)
	})
	paused, err := cl.PauseSchedule(ctx, "tick")
	if err != nil {
		t.Fatal(err)
	}
	last := paused.LastSlotMs
	started := slotsStarted(t, ctx, cl, "tick")
	want := 0
	for slot := first; slot <= last; slot += interval.Milliseconds() {
		want++
		if n := started[slot]; n != 1 {
			t.Errorf("slot %d (%s) started %d sessions; want 1", slot, time.UnixMilli(slot).Format(time.RFC3339Nano), n)
		}
	}
	if len(started) != want {
		t.Errorf("sessions for %d slots; want %d (slots %d to %d): %v", len(started), want, first, last, started)
	}
	if paused.Started != uint64(want) || paused.SkippedMissed != 0 || paused.SkippedOverlap != 0 {
		t.Errorf("the schedule counts %d started, %d missed, %d overlapping; want %d, 0, 0", paused.Started, paused.SkippedMissed, paused.SkippedOverlap, want)
	}
	if want < 11 {
		t.Errorf("only %d slots decided across 10 kills", want)
	}
	t.Logf("%d slots, each started once, across 10 leader kills", want)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
