package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The fake's job runs for two reads, then is done.
func (f *fakeSessions) StartBulkAction(_ context.Context, req *dexv1.StartBulkActionRequest) (*dexv1.StartBulkActionResponse, error) {
	f.bulkStarts = append(f.bulkStarts, req)
	return &dexv1.StartBulkActionResponse{Job: &dexv1.BulkJob{Id: req.JobId, Action: req.Action, Filter: req.Filter, Status: dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING}}, nil
}

func (f *fakeSessions) GetBulkJob(_ context.Context, req *dexv1.GetBulkJobRequest) (*dexv1.GetBulkJobResponse, error) {
	if len(f.bulkStarts) == 0 || req.JobId != f.bulkStarts[len(f.bulkStarts)-1].JobId {
		return nil, status.Errorf(codes.NotFound, "bulk job %q not found", req.JobId)
	}
	f.bulkGets++
	j := &dexv1.BulkJob{Id: req.JobId, Status: dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING, Acted: 100 * uint64(f.bulkGets)}
	if f.bulkGets >= 2 {
		j.Status = dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE
		j.Skipped = []*dexv1.BulkSkip{{Reason: "no turn in progress", Count: 3}}
	}
	return &dexv1.GetBulkJobResponse{Job: j}, nil
}

func (f *fakeSessions) ListBulkJobs(context.Context, *dexv1.ListBulkJobsRequest) (*dexv1.ListBulkJobsResponse, error) {
	return &dexv1.ListBulkJobsResponse{Jobs: []*dexv1.BulkJob{{Id: "bulk-1", Action: dexv1.BulkAction_BULK_ACTION_CLOSE, Status: dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE, Acted: 7,
		Filter: &dexv1.BulkFilter{Agent: "bot"}}}}, nil
}

func (f *fakeSessions) CancelBulkJob(_ context.Context, req *dexv1.CancelBulkJobRequest) (*dexv1.CancelBulkJobResponse, error) {
	f.bulkCancels = append(f.bulkCancels, req.JobId)
	return &dexv1.CancelBulkJobResponse{Job: &dexv1.BulkJob{Id: req.JobId, Status: dexv1.BulkJobStatus_BULK_JOB_STATUS_CANCELLED, Acted: 5}}, nil
}

func TestBulk_SessionCancelWithAFilterStartsAJobAndFollowsIt(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	before := time.Now()
	out, err := run(t, "--addr", addr, "session", "cancel", "--filter", "label=team=a,agent=bot,status=running,since=1h", "--label", "env=prod", "--reason", "outage")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.bulkStarts) != 1 {
		t.Fatalf("starts: %v", f.bulkStarts)
	}
	req := f.bulkStarts[0]
	fl := req.Filter
	if req.Action != dexv1.BulkAction_BULK_ACTION_CANCEL || req.Reason != "outage" || !strings.HasPrefix(req.JobId, "bulk-") ||
		fl.Agent != "bot" || fl.Status != dexv1.SessionStatus_SESSION_STATUS_RUNNING || len(fl.Labels) != 2 {
		t.Fatalf("request: %v", req)
	}
	if since := time.UnixMilli(fl.CreatedFromMs); since.Before(before.Add(-time.Hour-time.Second)) || since.After(before.Add(-time.Hour+time.Minute)) {
		t.Fatalf("since=1h gave created from %s", since)
	}
	for _, want := range []string{"bulk job " + req.JobId + " started: cancel label env=prod, label team=a, agent bot, status running", "running: 100 acted on", "done: 200 acted on, 3 skipped, 0 failed (skipped: 3 no turn in progress)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output %q lacks %q", out, want)
		}
	}
}

func TestBulk_NoWaitListShowCancel(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "close", "--agent", "bot", "--no-wait")
	if err != nil || f.bulkGets != 0 || !strings.Contains(out, "started: close agent bot") {
		t.Fatalf("close --no-wait: %q, %v, %d reads", out, err, f.bulkGets)
	}
	out, err = run(t, "--addr", addr, "bulk", "start", "label", "--status", "idle", "--set", "x=1", "--no-wait")
	if err != nil || f.bulkStarts[1].Labels[0].Key != "x" || f.bulkStarts[1].Action != dexv1.BulkAction_BULK_ACTION_LABEL {
		t.Fatalf("bulk start label: %q, %v", out, err)
	}
	out, err = run(t, "--addr", addr, "bulk", "list")
	if err != nil || !strings.Contains(out, "bulk-1") || !strings.Contains(out, "close agent bot") {
		t.Fatalf("bulk list: %q, %v", out, err)
	}
	out, err = run(t, "--addr", addr, "bulk", "show", f.bulkStarts[1].JobId)
	if err != nil || !strings.Contains(out, "running: 100 acted on") {
		t.Fatalf("bulk show: %q, %v", out, err)
	}
	if _, err := run(t, "--addr", addr, "bulk", "show", "nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("show of an unknown job: %v", err)
	}
	out, err = run(t, "--addr", addr, "bulk", "cancel", "bulk-9")
	if err != nil || len(f.bulkCancels) != 1 || !strings.Contains(out, "cancelled: 5 acted on") {
		t.Fatalf("bulk cancel: %q, %v", out, err)
	}
}

func TestBulk_BadInputIsRefusedBeforeAnyCall(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "delete", "--all", "--no-wait", "extra"}, "not both"},
		{[]string{"session", "cancel", "--filter", "colour=red"}, "is not one of label"},
		{[]string{"session", "cancel", "--filter", "agent"}, "each part is KEY=VALUE"},
		{[]string{"session", "cancel", "--status", "sleepy"}, "--status \"sleepy\""},
		{[]string{"session", "cancel", "--since", "yesterday"}, "--since"},
		{[]string{"bulk", "start", "explode", "--all"}, "use cancel, resume"},
		{[]string{"bulk", "start", "label", "--all"}, "needs --set"},
		{[]string{"bulk", "start", "delete"}, "would delete every session"},
	} {
		if _, err := run(t, append([]string{"--addr", addr}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
	}
	if len(f.bulkStarts) != 0 {
		t.Fatalf("refused input started jobs: %v", f.bulkStarts)
	}
	// A delete of everything with --all is asked.
	if _, err := run(t, "--addr", addr, "session", "delete", "--all", "--no-wait"); err != nil || len(f.bulkStarts) != 1 || !f.bulkStarts[0].All {
		t.Fatalf("delete --all: %v, %v", err, f.bulkStarts)
	}
}
