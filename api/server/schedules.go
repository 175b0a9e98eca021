package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/schedule"
)

// Schedules serves ScheduleService (docs/schedules.md). Schedules live in
// partition 0 (the router sends every call there). This node checks the
// spec (the cron expression, the zone, the interval) and computes the
// slot times the commands carry; Apply checks the rest again and decides.
type Schedules struct {
	dexv1.UnimplementedScheduleServiceServer
	readyGate
	limits    Limits
	providers AgentProviders
	// partitions is the cluster's partition count: a trigger's session id
	// is drawn in partition 0.
	partitions int
	now        func() time.Time
}

// NewSchedules returns the schedule handlers of node.
func NewSchedules(node *cluster.Node, limits Limits) *Schedules {
	return &Schedules{readyGate: readyGate{node: node}, limits: limits, now: time.Now}
}

// members refuses a schedule command before every member applies it.
func (s *Schedules) members() error {
	if !s.node.MembersApply(fsm.ScheduleLogVersion) {
		return status.Errorf(codes.FailedPrecondition, "a member of the cluster runs a Dex that cannot apply schedules (log version below %d): upgrade every node, then use schedules", fsm.ScheduleLogVersion)
	}
	return nil
}

func (s *Schedules) CreateSchedule(ctx context.Context, req *dexv1.CreateScheduleRequest) (*dexv1.CreateScheduleResponse, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := required("schedule_id", req.ScheduleId); err != nil {
		return nil, err
	}
	if r := fsm.CheckID("schedule id", req.ScheduleId); r != nil {
		return nil, RejectionStatus(r)
	}
	if err := s.limits.checkMessage(req.Message); err != nil {
		return nil, err
	}
	if err := s.members(); err != nil {
		return nil, err
	}
	now := s.now().UnixMilli()
	spec, err := schedule.Parse(req.Cron, req.TimeZone, req.IntervalMs, now)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	sch := &fsmpb.Schedule{
		Id: req.ScheduleId, Cron: req.Cron, TimeZone: req.TimeZone, IntervalMs: req.IntervalMs, AnchorMs: now,
		Agent: req.Agent, Provider: s.providers[req.Agent], Message: req.Message, Labels: labelsFromAPI(req.Labels),
		Overlap: fsmpb.ScheduleOverlap(req.Overlap), CatchUp: fsmpb.ScheduleCatchUp(req.CatchUp), Paused: req.Paused,
	}
	if req.IntervalMs == 0 {
		sch.AnchorMs = 0
	}
	if sch.Overlap == fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_UNSPECIFIED {
		sch.Overlap = fsmpb.ScheduleOverlap_SCHEDULE_OVERLAP_SKIP
	}
	if sch.CatchUp == fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_UNSPECIFIED {
		sch.CatchUp = fsmpb.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP
	}
	if !sch.Paused {
		sch.NextSlotMs = spec.Next(now)
	}
	if r := fsm.CheckScheduleRow(sch); r != nil {
		return nil, RejectionStatus(r)
	}
	st := s.node.State()
	if st.Schedule(sch.Id) != nil {
		return nil, status.Errorf(codes.AlreadyExists, "schedule %q already exists", sch.Id)
	}
	if n := st.ScheduleCount(); n >= fsm.MaxSchedules {
		return nil, status.Errorf(codes.ResourceExhausted, "the cluster holds %d schedules, the most it holds: delete one first", n)
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_PutSchedule{PutSchedule: &fsmpb.PutSchedule{Schedule: sch}}}); err != nil {
		return nil, err
	}
	return &dexv1.CreateScheduleResponse{Schedule: scheduleAPI(s.node.State().Schedule(sch.Id))}, nil
}

// stored is the schedule a request names, from this node's state.
func (s *Schedules) stored(ctx context.Context, id string) (*fsmpb.Schedule, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := required("schedule_id", id); err != nil {
		return nil, err
	}
	if r := fsm.CheckID("schedule id", id); r != nil {
		return nil, RejectionStatus(r)
	}
	sch := s.node.State().Schedule(id)
	if sch == nil {
		return nil, status.Errorf(codes.NotFound, "schedule %q not found", id)
	}
	return sch, nil
}

func (s *Schedules) GetSchedule(ctx context.Context, req *dexv1.GetScheduleRequest) (*dexv1.GetScheduleResponse, error) {
	sch, err := s.stored(ctx, req.ScheduleId)
	if err != nil {
		return nil, err
	}
	return &dexv1.GetScheduleResponse{Schedule: scheduleAPI(sch)}, nil
}

func (s *Schedules) ListSchedules(ctx context.Context, _ *dexv1.ListSchedulesRequest) (*dexv1.ListSchedulesResponse, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	out := &dexv1.ListSchedulesResponse{}
	for _, sch := range s.node.State().Schedules() {
		out.Schedules = append(out.Schedules, scheduleAPI(sch))
	}
	return out, nil
}

func (s *Schedules) PauseSchedule(ctx context.Context, req *dexv1.PauseScheduleRequest) (*dexv1.PauseScheduleResponse, error) {
	if _, err := s.stored(ctx, req.ScheduleId); err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetSchedulePaused{SetSchedulePaused: &fsmpb.SetSchedulePaused{ScheduleId: req.ScheduleId, Paused: true}}}); err != nil {
		return nil, err
	}
	return &dexv1.PauseScheduleResponse{Schedule: scheduleAPI(s.node.State().Schedule(req.ScheduleId))}, nil
}

func (s *Schedules) ResumeSchedule(ctx context.Context, req *dexv1.ResumeScheduleRequest) (*dexv1.ResumeScheduleResponse, error) {
	sch, err := s.stored(ctx, req.ScheduleId)
	if err != nil {
		return nil, err
	}
	spec, err := schedule.SpecOf(sch)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "schedule %s: its spec does not parse on this node: %v", sch.Id, err)
	}
	c := &fsmpb.SetSchedulePaused{ScheduleId: sch.Id, NextSlotMs: spec.Next(s.now().UnixMilli())}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetSchedulePaused{SetSchedulePaused: c}}); err != nil {
		return nil, err
	}
	return &dexv1.ResumeScheduleResponse{Schedule: scheduleAPI(s.node.State().Schedule(sch.Id))}, nil
}

func (s *Schedules) DeleteSchedule(ctx context.Context, req *dexv1.DeleteScheduleRequest) (*dexv1.DeleteScheduleResponse, error) {
	if _, err := s.stored(ctx, req.ScheduleId); err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_DeleteSchedule{DeleteSchedule: &fsmpb.DeleteSchedule{ScheduleId: req.ScheduleId}}}); err != nil {
		return nil, err
	}
	return &dexv1.DeleteScheduleResponse{}, nil
}

// TriggerSchedule starts one session of the schedule now, outside its
// slots. Its id is the schedule's and the trigger's time, drawn in
// partition 0 and not taken.
func (s *Schedules) TriggerSchedule(ctx context.Context, req *dexv1.TriggerScheduleRequest) (*dexv1.TriggerScheduleResponse, error) {
	sch, err := s.stored(ctx, req.ScheduleId)
	if err != nil {
		return nil, err
	}
	now := s.now().UnixMilli()
	st := s.node.State()
	id := schedule.SessionID(sch.Id, now, s.partitions, func(id string) bool { return st.SessionIDTaken(id) })
	fire := &fsmpb.FireScheduleSlot{Epoch: s.node.Epoch(), ScheduleId: sch.Id, SlotMs: now, SessionId: id, Manual: true}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_FireScheduleSlot{FireScheduleSlot: fire}}); err != nil {
		return nil, err
	}
	return &dexv1.TriggerScheduleResponse{SessionId: id}, nil
}

// scheduleAPI is a stored schedule as the API shows it.
func scheduleAPI(s *fsmpb.Schedule) *dexv1.Schedule {
	if s == nil {
		return nil
	}
	out := &dexv1.Schedule{
		Id: s.Id, Cron: s.Cron, TimeZone: s.TimeZone, IntervalMs: s.IntervalMs,
		Agent: s.Agent, Message: s.Message,
		Overlap: dexv1.ScheduleOverlap(s.Overlap), CatchUp: dexv1.ScheduleCatchUp(s.CatchUp), Paused: s.Paused,
		CreatedAtMs: s.CreatedAtMs, UpdatedAtMs: s.UpdatedAtMs, NextSlotMs: s.NextSlotMs,
		LastSlotMs: s.LastSlotMs, LastOutcome: dexv1.ScheduleSlotOutcome(s.LastOutcome), LastSessionId: s.LastSessionId,
		QueuedSlotMs: s.QueuedSlotMs, Started: s.Started, SkippedOverlap: s.SkippedOverlap, SkippedMissed: s.SkippedMissed,
	}
	for _, l := range s.Labels {
		out.Labels = append(out.Labels, &dexv1.Label{Key: l.Key, Value: l.Value})
	}
	return out
}
