package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// fakeSchedules records the schedule calls and keeps the schedules.
type fakeSchedules struct {
	dexv1.UnimplementedScheduleServiceServer
	mu       sync.Mutex
	created  []*dexv1.CreateScheduleRequest
	calls    []string
	byID     map[string]*dexv1.Schedule
	triggers int
}

func (f *fakeSchedules) CreateSchedule(_ context.Context, req *dexv1.CreateScheduleRequest) (*dexv1.CreateScheduleResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Cron == "61 * * * *" {
		return nil, status.Error(codes.InvalidArgument, `bad cron expression "61 * * * *": end of range (61) above maximum (59): 61`)
	}
	if f.byID[req.ScheduleId] != nil {
		return nil, status.Errorf(codes.AlreadyExists, "schedule %q already exists", req.ScheduleId)
	}
	f.created = append(f.created, req)
	s := &dexv1.Schedule{Id: req.ScheduleId, Cron: req.Cron, TimeZone: req.TimeZone, IntervalMs: req.IntervalMs, Message: req.Message,
		Labels: req.Labels, Overlap: req.Overlap, CatchUp: req.CatchUp, NextSlotMs: 1767258000000}
	f.byID[s.Id] = s
	return &dexv1.CreateScheduleResponse{Schedule: s}, nil
}

func (f *fakeSchedules) get(id string) (*dexv1.Schedule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, id)
	if s := f.byID[id]; s != nil {
		return s, nil
	}
	return nil, status.Errorf(codes.NotFound, "schedule %q not found", id)
}

func (f *fakeSchedules) GetSchedule(_ context.Context, req *dexv1.GetScheduleRequest) (*dexv1.GetScheduleResponse, error) {
	s, err := f.get(req.ScheduleId)
	return &dexv1.GetScheduleResponse{Schedule: s}, err
}

func (f *fakeSchedules) ListSchedules(context.Context, *dexv1.ListSchedulesRequest) (*dexv1.ListSchedulesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &dexv1.ListSchedulesResponse{}
	for _, id := range []string{"nightly", "ticks"} {
		if s := f.byID[id]; s != nil {
			out.Schedules = append(out.Schedules, s)
		}
	}
	return out, nil
}

func (f *fakeSchedules) PauseSchedule(_ context.Context, req *dexv1.PauseScheduleRequest) (*dexv1.PauseScheduleResponse, error) {
	s, err := f.get(req.ScheduleId)
	if err == nil {
		s.Paused, s.NextSlotMs = true, 0
	}
	return &dexv1.PauseScheduleResponse{Schedule: s}, err
}

func (f *fakeSchedules) ResumeSchedule(_ context.Context, req *dexv1.ResumeScheduleRequest) (*dexv1.ResumeScheduleResponse, error) {
	s, err := f.get(req.ScheduleId)
	if err == nil {
		s.Paused, s.NextSlotMs = false, 1767261600000
	}
	return &dexv1.ResumeScheduleResponse{Schedule: s}, err
}

func (f *fakeSchedules) DeleteSchedule(_ context.Context, req *dexv1.DeleteScheduleRequest) (*dexv1.DeleteScheduleResponse, error) {
	if _, err := f.get(req.ScheduleId); err != nil {
		return nil, err
	}
	f.mu.Lock()
	delete(f.byID, req.ScheduleId)
	f.mu.Unlock()
	return &dexv1.DeleteScheduleResponse{}, nil
}

func (f *fakeSchedules) TriggerSchedule(_ context.Context, req *dexv1.TriggerScheduleRequest) (*dexv1.TriggerScheduleResponse, error) {
	if _, err := f.get(req.ScheduleId); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.triggers++
	f.mu.Unlock()
	return &dexv1.TriggerScheduleResponse{SessionId: req.ScheduleId + "-1767258000000"}, nil
}

func startFakeSchedules(t *testing.T, f *fakeSchedules) string {
	t.Helper()
	f.byID = map[string]*dexv1.Schedule{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(client.HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	dexv1.RegisterScheduleServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestScheduleCommandsSendTheirRequestsAndPrintTheAnswers(t *testing.T) {
	f := &fakeSchedules{}
	addr := startFakeSchedules(t, f)
	out, err := run(t, "--addr", addr, "schedule", "create", "nightly", "--cron", "0 9 * * 1-5", "--tz", "Europe/Paris",
		"--message", "write the report", "--label", "team=ops", "--overlap", "queue-one", "--catch-up", "latest")
	if err != nil {
		t.Fatal(err)
	}
	if out != "nightly  created, next slot 2026-01-01T09:00:00Z\n" {
		t.Fatalf("create printed %q", out)
	}
	req := f.created[0]
	if req.Cron != "0 9 * * 1-5" || req.TimeZone != "Europe/Paris" || req.Message != "write the report" || labelText(req.Labels) != "team=ops" ||
		req.Overlap != dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE || req.CatchUp != dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_LATEST || req.IntervalMs != 0 {
		t.Fatalf("create sent %v", req)
	}
	out, err = run(t, "--addr", addr, "schedule", "create", "ticks", "--every", "90s", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if got["id"] != "ticks" || got["interval_ms"] != 90000.0 || got["overlap"] != "skip" || got["catch_up"] != "skip" {
		t.Fatalf("create --json printed %v", got)
	}
	out, err = run(t, "--addr", addr, "schedule", "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "nightly  0 9 * * 1-5 (Europe/Paris)  running") || !strings.Contains(out, "ticks    every 1m30s") {
		t.Fatalf("list printed %q", out)
	}
	out, err = run(t, "--addr", addr, "schedule", "show", "nightly")
	if err != nil || !strings.Contains(out, "overlap   queue-one") || !strings.Contains(out, "catch-up  latest") || !strings.Contains(out, "label     team=ops") {
		t.Fatalf("show printed %q, %v", out, err)
	}
	if out, err = run(t, "--addr", addr, "schedule", "pause", "nightly"); err != nil || out != "nightly  paused\n" {
		t.Fatalf("pause printed %q, %v", out, err)
	}
	if out, err = run(t, "--addr", addr, "schedule", "resume", "nightly"); err != nil || out != "nightly  resumed, next slot 2026-01-01T10:00:00Z\n" {
		t.Fatalf("resume printed %q, %v", out, err)
	}
	if out, err = run(t, "--addr", addr, "schedule", "trigger", "nightly"); err != nil || out != "nightly-1767258000000  started by schedule nightly\n" || f.triggers != 1 {
		t.Fatalf("trigger printed %q, %v (%d triggers)", out, err, f.triggers)
	}
	if out, err = run(t, "--addr", addr, "schedule", "delete", "nightly"); err != nil || out != "nightly  deleted\n" {
		t.Fatalf("delete printed %q, %v", out, err)
	}
	if _, err := run(t, "--addr", addr, "schedule", "show", "nightly"); err == nil || !strings.Contains(err.Error(), `schedule "nightly" not found`) {
		t.Fatalf("show after delete: %v", err)
	}
}

func TestScheduleCreateRefusals(t *testing.T) {
	f := &fakeSchedules{}
	addr := startFakeSchedules(t, f)
	for _, args := range [][]string{
		{"schedule", "create", "s"},
		{"schedule", "create", "s", "--cron", "* * * * *", "--every", "1m"},
		{"schedule", "create", "s", "--every", "1m", "--overlap", "sometimes"},
		{"schedule", "create", "s", "--every", "1m", "--catch-up", "never"},
		{"schedule", "create", "s", "--every", "1m", "--label", "novalue"},
	} {
		if _, err := run(t, append([]string{"--addr", addr}, args...)...); err == nil || !isUsage(err) {
			t.Errorf("%v: %v; want a usage error", args, err)
		}
	}
	if _, err := run(t, "--addr", addr, "schedule", "create", "s", "--cron", "61 * * * *"); err == nil || !strings.Contains(err.Error(), "bad cron expression") {
		t.Errorf("a bad cron: %v; want the server's refusal", err)
	}
	if len(f.created) != 0 {
		t.Fatalf("refusals created %v", f.created)
	}
}
