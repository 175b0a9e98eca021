//go:build e2e

package chaos

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// docs/schedules.md: the leader gets SIGKILL at a schedule's firing moment,
// ten times, exactly there: the round's failpoint holds its timer wheel
// right before it proposes a FireScheduleSlot (even rounds: the slot is not
// decided, the next leader must start it) or right after one committed
// (odd rounds: the slot is decided, the next leader must not start it
// again). The killed node restarts and rejoins. Every slot from the first
// to the last decided started exactly one session, none was missed.
func TestFailpoints_LeaderKilledAtAScheduleFireStartsEachSlotOnce(t *testing.T) {
	const interval = time.Second
	e, fp := newFailpointEnv(t, chaosBinDir(t), "", 3)
	ctx := e.ctx(3 * time.Minute)
	// Overlap allow: no Worker runs, each session stays under way, and
	// every slot must still start its own.
	// Until every node recorded its log version the cluster refuses
	// schedules (FailedPrecondition): a new cluster's nodes record theirs
	// as they join.
	var created *dexv1.Schedule
	for {
		var err error
		created, err = e.client.CreateSchedule(ctx, &dexv1.CreateScheduleRequest{
			ScheduleId: "tick", IntervalMs: interval.Milliseconds(), Message: "tick",
			Overlap: dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_ALLOW,
		})
		if err == nil {
			break
		}
		if status.Code(err) != codes.FailedPrecondition || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	first := created.NextSlotMs
	for round := range 10 {
		name := harness.FailpointBeforeScheduleFire
		if round%2 == 1 {
			name = harness.FailpointAfterScheduleFire
		}
		leader := e.leader()
		before := failpointCount(fp[leader], name)
		if err := harness.SetFailpoint(fp[leader], name, "sleep(30000)"); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for failpointCount(fp[leader], name) <= before {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: leader %s never reached %s", round, leader.ID, name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		leader.Kill()
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
		e.waitReady()
	}
	// One more slot is decided by a leader that lives, then it stops.
	sch, err := e.client.GetSchedule(ctx, "tick")
	if err != nil {
		t.Fatal(err)
	}
	for {
		now, err := e.client.GetSchedule(ctx, "tick")
		if err == nil && now.LastSlotMs >= sch.NextSlotMs {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no slot decided after the last kill")
		}
		time.Sleep(50 * time.Millisecond)
	}
	paused, err := e.client.PauseSchedule(ctx, "tick")
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := e.client.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	started := map[int64]int{}
	for _, s := range sessions {
		labels := map[string]string{}
		for _, l := range s.Labels {
			labels[l.Key] = l.Value
		}
		if labels["dex.schedule"] == "tick" {
			slot, _ := strconv.ParseInt(labels["dex.slot"], 10, 64)
			started[slot]++
		}
	}
	want := 0
	for slot := first; slot <= paused.LastSlotMs; slot += interval.Milliseconds() {
		want++
		if started[slot] != 1 {
			t.Errorf("slot %d started %d sessions; want 1", slot, started[slot])
		}
	}
	if len(started) != want || paused.Started != uint64(want) || paused.SkippedMissed+paused.SkippedOverlap != 0 {
		t.Errorf("%d slots with sessions, the schedule counts %d started, %d missed, %d overlapping; want %d slots each started once",
			len(started), paused.Started, paused.SkippedMissed, paused.SkippedOverlap, want)
	}
	t.Logf("%d slots, each started once, across 10 leader kills at the fire", want)
}
