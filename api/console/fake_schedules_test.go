package console

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/schedule"
)

// The fake's schedule calls: the spec is checked by the API's own parser,
// so its refusals read as the cluster's.

func (f *fakeAPI) schedule(id string) (*dexv1.Schedule, error) {
	for _, s := range f.schedules {
		if s.Id == id {
			return s, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "schedule %q not found", id)
}

func (f *fakeAPI) CreateSchedule(ctx context.Context, req *dexv1.CreateScheduleRequest) (*dexv1.CreateScheduleResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	if _, err := schedule.Parse(req.Cron, req.TimeZone, req.IntervalMs, 1000); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := checkFakeLabels(req.Labels); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.schedule(req.ScheduleId); err == nil {
		return nil, status.Errorf(codes.AlreadyExists, "schedule %q already exists", req.ScheduleId)
	}
	s := &dexv1.Schedule{Id: req.ScheduleId, Cron: req.Cron, TimeZone: req.TimeZone, IntervalMs: req.IntervalMs, Agent: req.Agent, Message: req.Message,
		Labels: req.Labels, Overlap: req.Overlap, CatchUp: req.CatchUp, Paused: req.Paused}
	f.schedules = append(f.schedules, s)
	slices.SortFunc(f.schedules, func(a, b *dexv1.Schedule) int { return strings.Compare(a.Id, b.Id) })
	f.calls = append(f.calls, fmt.Sprintf("schedule %s cron=%s zone=%s every=%dms agent=%s labels=%s message=%s overlap=%s catchup=%s paused=%v",
		s.Id, s.Cron, s.TimeZone, s.IntervalMs, s.Agent, labelsLine(s.Labels), s.Message, s.Overlap, s.CatchUp, s.Paused))
	return &dexv1.CreateScheduleResponse{Schedule: proto.Clone(s).(*dexv1.Schedule)}, nil
}

func (f *fakeAPI) GetSchedule(ctx context.Context, req *dexv1.GetScheduleRequest) (*dexv1.GetScheduleResponse, error) {
	if err := f.authorize(ctx, false); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.schedule(req.ScheduleId)
	if err != nil {
		return nil, err
	}
	return &dexv1.GetScheduleResponse{Schedule: proto.Clone(s).(*dexv1.Schedule)}, nil
}

// pauseSchedule sets a schedule's paused state (idempotent, as the API).
func (f *fakeAPI) pauseSchedule(ctx context.Context, id string, paused bool) (*dexv1.Schedule, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.schedule(id)
	if err != nil {
		return nil, err
	}
	if s.Paused != paused {
		s.Paused = paused
		f.calls = append(f.calls, fmt.Sprintf("schedule %s paused=%v", id, paused))
	}
	return proto.Clone(s).(*dexv1.Schedule), nil
}

func (f *fakeAPI) PauseSchedule(ctx context.Context, req *dexv1.PauseScheduleRequest) (*dexv1.PauseScheduleResponse, error) {
	s, err := f.pauseSchedule(ctx, req.ScheduleId, true)
	return &dexv1.PauseScheduleResponse{Schedule: s}, err
}

func (f *fakeAPI) ResumeSchedule(ctx context.Context, req *dexv1.ResumeScheduleRequest) (*dexv1.ResumeScheduleResponse, error) {
	s, err := f.pauseSchedule(ctx, req.ScheduleId, false)
	return &dexv1.ResumeScheduleResponse{Schedule: s}, err
}

func (f *fakeAPI) DeleteSchedule(ctx context.Context, req *dexv1.DeleteScheduleRequest) (*dexv1.DeleteScheduleResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.schedule(req.ScheduleId); err != nil {
		return nil, err
	}
	f.schedules = slices.DeleteFunc(f.schedules, func(s *dexv1.Schedule) bool { return s.Id == req.ScheduleId })
	f.calls = append(f.calls, "delete schedule "+req.ScheduleId)
	return &dexv1.DeleteScheduleResponse{}, nil
}

// TriggerSchedule starts the schedule's session now, with its labels and
// dex.schedule.
func (f *fakeAPI) TriggerSchedule(ctx context.Context, req *dexv1.TriggerScheduleRequest) (*dexv1.TriggerScheduleResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.schedule(req.ScheduleId)
	if err != nil {
		return nil, err
	}
	s.Started++
	id := fmt.Sprintf("%s-%d", s.Id, 10000+s.Started)
	labels := append(slices.Clone(s.Labels), &dexv1.Label{Key: "dex.schedule", Value: s.Id})
	f.sessions[id] = &dexv1.GetSessionResponse{Session: &dexv1.Session{Id: id, Agent: s.Agent, Labels: labels, Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING, CreatedAtMs: 9000}}
	s.LastSessionId = id
	f.calls = append(f.calls, "trigger "+s.Id+" started "+id)
	return &dexv1.TriggerScheduleResponse{SessionId: id}, nil
}
