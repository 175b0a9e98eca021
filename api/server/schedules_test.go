package server

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Every bad spec or template is refused with InvalidArgument naming what
// is wrong, and no schedule is created.
func TestSchedules_BadInputIsRefusedAndChangesNothing(t *testing.T) {
	_, _, conn := serveSingleNode(t, Options{Dispatch: noTasks{}, Deadlines: noDeadlines{}})
	c := dexv1.NewScheduleServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var many []*dexv1.Label
	for i := range fsm.MaxScheduleLabels + 1 {
		many = append(many, &dexv1.Label{Key: "k" + strconv.Itoa(i), Value: "v"})
	}
	for _, tc := range []struct {
		name string
		req  *dexv1.CreateScheduleRequest
		code codes.Code
		says string
	}{
		{"no id", &dexv1.CreateScheduleRequest{IntervalMs: 1000}, codes.InvalidArgument, "schedule_id"},
		{"bad id", &dexv1.CreateScheduleRequest{ScheduleId: "a b", IntervalMs: 1000}, codes.InvalidArgument, "schedule_id"},
		{"no spec", &dexv1.CreateScheduleRequest{ScheduleId: "s"}, codes.InvalidArgument, "cron expression or an interval"},
		{"both specs", &dexv1.CreateScheduleRequest{ScheduleId: "s", Cron: "* * * * *", IntervalMs: 1000}, codes.InvalidArgument, "not both"},
		{"bad cron", &dexv1.CreateScheduleRequest{ScheduleId: "s", Cron: "61 * * * *"}, codes.InvalidArgument, "bad cron expression"},
		{"never", &dexv1.CreateScheduleRequest{ScheduleId: "s", Cron: "0 0 30 2 *"}, codes.InvalidArgument, "never fires"},
		{"every", &dexv1.CreateScheduleRequest{ScheduleId: "s", Cron: "@every 1s"}, codes.InvalidArgument, "@every"},
		{"unknown zone", &dexv1.CreateScheduleRequest{ScheduleId: "s", Cron: "0 9 * * *", TimeZone: "Mars/Olympus"}, codes.InvalidArgument, "unknown time zone"},
		{"zero interval", &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: -1}, codes.InvalidArgument, "positive"},
		{"short interval", &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: 10}, codes.InvalidArgument, "at least"},
		{"zone with interval", &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: 1000, TimeZone: "UTC"}, codes.InvalidArgument, "time zone"},
		{"bad agent", &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: 1000, Agent: "bot 1"}, codes.InvalidArgument, "agent"},
		{"too many labels", &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: 1000, Labels: many}, codes.InvalidArgument, "labels"},
		{"bad label", &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: 1000, Labels: []*dexv1.Label{{Key: "Bad Key"}}}, codes.InvalidArgument, "label key"},
		{"reserved label", &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: 1000, Labels: []*dexv1.Label{{Key: fsm.ScheduleSlotLabel, Value: "1"}}}, codes.InvalidArgument, fsm.ScheduleSlotLabel},
		{"bad overlap", &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: 1000, Overlap: 7}, codes.InvalidArgument, "overlap"},
	} {
		_, err := c.CreateSchedule(ctx, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.says) {
			t.Errorf("%s: %v; want %s saying %q", tc.name, err, tc.code, tc.says)
		}
	}
	list, err := c.ListSchedules(ctx, &dexv1.ListSchedulesRequest{})
	if err != nil || len(list.Schedules) != 0 {
		t.Fatalf("schedules after the refusals: %v, %v; want none", list, err)
	}
	for name, err := range map[string]error{
		"get":     second(c.GetSchedule(ctx, &dexv1.GetScheduleRequest{ScheduleId: "nope"})),
		"pause":   second(c.PauseSchedule(ctx, &dexv1.PauseScheduleRequest{ScheduleId: "nope"})),
		"resume":  second(c.ResumeSchedule(ctx, &dexv1.ResumeScheduleRequest{ScheduleId: "nope"})),
		"delete":  second(c.DeleteSchedule(ctx, &dexv1.DeleteScheduleRequest{ScheduleId: "nope"})),
		"trigger": second(c.TriggerSchedule(ctx, &dexv1.TriggerScheduleRequest{ScheduleId: "nope"})),
	} {
		if status.Code(err) != codes.NotFound {
			t.Errorf("%s of an unknown schedule: %v; want NotFound", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// A schedule's life through the API: created with its first slot, shown,
// listed, paused (no slot owed), resumed (a slot after now), triggered (a
// session with the schedule's labels starts), deleted (its sessions stay).
func TestSchedules_Lifecycle(t *testing.T) {
	_, _, conn := serveSingleNode(t, Options{Dispatch: noTasks{}, Deadlines: noDeadlines{}})
	c, sc := dexv1.NewScheduleServiceClient(conn), dexv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := time.Now().UnixMilli()
	created, err := c.CreateSchedule(ctx, &dexv1.CreateScheduleRequest{
		ScheduleId: "report", Cron: "0 9 * * 1-5", TimeZone: "Europe/Paris", Message: "write the report",
		Labels: []*dexv1.Label{{Key: "team", Value: "ops"}}, Overlap: dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := created.Schedule
	if s.NextSlotMs <= before || s.CatchUp != dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP || s.Overlap != dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE {
		t.Fatalf("created %v; want a future slot, catch-up skip by default, overlap queue_one", s)
	}
	if at := time.UnixMilli(s.NextSlotMs).In(mustZone(t, "Europe/Paris")); at.Hour() != 9 || at.Minute() != 0 {
		t.Fatalf("next slot %v; want 09:00 in Paris", at)
	}
	if _, err := c.CreateSchedule(ctx, &dexv1.CreateScheduleRequest{ScheduleId: "report", IntervalMs: 1000}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a second create: %v; want AlreadyExists", err)
	}
	paused, err := c.PauseSchedule(ctx, &dexv1.PauseScheduleRequest{ScheduleId: "report"})
	if err != nil || !paused.Schedule.Paused || paused.Schedule.NextSlotMs != 0 {
		t.Fatalf("pause: %v, %v", paused, err)
	}
	resumed, err := c.ResumeSchedule(ctx, &dexv1.ResumeScheduleRequest{ScheduleId: "report"})
	if err != nil || resumed.Schedule.Paused || resumed.Schedule.NextSlotMs != s.NextSlotMs {
		t.Fatalf("resume: %v, %v; want the same next slot %d", resumed, err, s.NextSlotMs)
	}
	trig, err := c.TriggerSchedule(ctx, &dexv1.TriggerScheduleRequest{ScheduleId: "report"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := sc.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: trig.SessionId})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, l := range got.Session.Labels {
		labels[l.Key] = l.Value
	}
	if labels["team"] != "ops" || labels[fsm.ScheduleLabel] != "report" || labels[fsm.ScheduleSlotLabel] == "" {
		t.Fatalf("triggered session labels %v", labels)
	}
	shown, err := c.GetSchedule(ctx, &dexv1.GetScheduleRequest{ScheduleId: "report"})
	if err != nil || shown.Schedule.Started != 1 || shown.Schedule.LastSessionId != trig.SessionId || shown.Schedule.NextSlotMs != s.NextSlotMs {
		t.Fatalf("after a trigger: %v, %v", shown, err)
	}
	if _, err := c.CreateSchedule(ctx, &dexv1.CreateScheduleRequest{ScheduleId: "ticks", IntervalMs: 5000, Paused: true}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSchedules(ctx, &dexv1.ListSchedulesRequest{})
	if err != nil || len(list.Schedules) != 2 || list.Schedules[0].Id != "report" || list.Schedules[1].Id != "ticks" || list.Schedules[1].NextSlotMs != 0 {
		t.Fatalf("list: %v, %v", list, err)
	}
	if _, err := c.DeleteSchedule(ctx, &dexv1.DeleteScheduleRequest{ScheduleId: "report"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSchedule(ctx, &dexv1.GetScheduleRequest{ScheduleId: "report"}); status.Code(err) != codes.NotFound {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := sc.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: trig.SessionId}); err != nil {
		t.Fatalf("the triggered session went with its schedule: %v", err)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// While a member runs a Dex whose log version is older than the schedule
// commands', creating a schedule is refused and nothing is proposed.
func TestSchedules_RefusedWhileAMemberCannotApplyThem(t *testing.T) {
	node, _, conn := serveSingleNode(t, Options{Dispatch: noTasks{}, Deadlines: noDeadlines{}})
	c := dexv1.NewScheduleServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFor(t, "the node's info recorded", func() bool { return len(node.State().Nodes()) == 1 })
	self := proto.CloneOf(node.State().Nodes()[0])
	self.LogVersion = fsm.ScheduleLogVersion - 1
	if res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: self}}}); err != nil || res.Err != nil {
		t.Fatalf("record the node at an older log version: %v %v", err, res.Err)
	}
	applied := node.State().Meta().AppliedIndex
	_, err := c.CreateSchedule(ctx, &dexv1.CreateScheduleRequest{ScheduleId: "s", IntervalMs: 1000})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "upgrade every node") {
		t.Fatalf("create with an older member: %v; want FailedPrecondition naming the upgrade", err)
	}
	if got := node.State().Meta().AppliedIndex; got != applied || node.State().ScheduleCount() != 0 {
		t.Fatalf("a refused create proposed %d commands", got-applied)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
