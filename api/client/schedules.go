package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Schedules (docs/schedules.md): a schedule starts a session at each slot
// of a cron expression or an interval, exactly once per slot.

// CreateSchedule creates a schedule. The call is retried when a try may
// not have reached the cluster: a repeat that finds the schedule an
// earlier try created (same spec) returns it.
func (c *Client) CreateSchedule(ctx context.Context, req *dexv1.CreateScheduleRequest) (*dexv1.Schedule, error) {
	tries := 0
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.CreateScheduleResponse, error) {
		tries++
		return c.sched.CreateSchedule(ctx, req, o...)
	})
	if err == nil {
		return resp.Schedule, nil
	}
	if tries > 1 && status.Code(err) == codes.AlreadyExists {
		got, gerr := c.GetSchedule(ctx, req.ScheduleId)
		if gerr == nil && got.Cron == req.Cron && got.TimeZone == req.TimeZone && got.IntervalMs == req.IntervalMs && got.Message == req.Message {
			return got, nil
		}
	}
	return nil, err
}

// GetSchedule returns a schedule.
func (c *Client) GetSchedule(ctx context.Context, id string) (*dexv1.Schedule, error) {
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.GetScheduleResponse, error) {
		return c.sched.GetSchedule(ctx, &dexv1.GetScheduleRequest{ScheduleId: id}, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Schedule, nil
}

// ListSchedules returns every schedule, by id.
func (c *Client) ListSchedules(ctx context.Context) ([]*dexv1.Schedule, error) {
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ListSchedulesResponse, error) {
		return c.sched.ListSchedules(ctx, &dexv1.ListSchedulesRequest{}, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Schedules, nil
}

// PauseSchedule pauses a schedule (idempotent: pausing a paused one
// changes nothing).
func (c *Client) PauseSchedule(ctx context.Context, id string) (*dexv1.Schedule, error) {
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.PauseScheduleResponse, error) {
		return c.sched.PauseSchedule(ctx, &dexv1.PauseScheduleRequest{ScheduleId: id}, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Schedule, nil
}

// ResumeSchedule resumes a schedule at its first slot after now
// (idempotent).
func (c *Client) ResumeSchedule(ctx context.Context, id string) (*dexv1.Schedule, error) {
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ResumeScheduleResponse, error) {
		return c.sched.ResumeSchedule(ctx, &dexv1.ResumeScheduleRequest{ScheduleId: id}, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Schedule, nil
}

// DeleteSchedule deletes a schedule; the sessions it started stay. A
// retried delete that finds the schedule gone succeeds.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	tries := 0
	_, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.DeleteScheduleResponse, error) {
		tries++
		return c.sched.DeleteSchedule(ctx, &dexv1.DeleteScheduleRequest{ScheduleId: id}, o...)
	})
	if tries > 1 && status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// TriggerSchedule starts one session of the schedule now and returns its
// id. It is not idempotent (each call starts a session), so it is
// repeated only when nothing was changed.
func (c *Client) TriggerSchedule(ctx context.Context, id string) (string, error) {
	resp, err := call(ctx, false, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.TriggerScheduleResponse, error) {
		return c.sched.TriggerSchedule(ctx, &dexv1.TriggerScheduleRequest{ScheduleId: id}, o...)
	})
	if err != nil {
		return "", err
	}
	return resp.SessionId, nil
}
