package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestBulk_StartReadListCancelAndBadInput(t *testing.T) {
	_, _, conn := serveSingleNode(t, Options{})
	c := dexv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	team := []*dexv1.Label{{Key: "team", Value: "a"}}
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s1", Message: "go", Labels: team}); err != nil {
		t.Fatal(err)
	}
	r, err := c.StartBulkAction(ctx, &dexv1.StartBulkActionRequest{Action: dexv1.BulkAction_BULK_ACTION_CANCEL, Filter: &dexv1.BulkFilter{Labels: team}, Reason: "outage"})
	if err != nil {
		t.Fatal(err)
	}
	j := r.Job
	if !strings.HasPrefix(j.Id, "bulk-") || j.Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING || j.Reason != "outage" || j.Filter.Labels[0].Value != "a" {
		t.Fatalf("started job: %v", j)
	}
	got, err := c.GetBulkJob(ctx, &dexv1.GetBulkJobRequest{JobId: j.Id})
	if err != nil || got.Job.Id != j.Id {
		t.Fatalf("get: %v, %v", got, err)
	}
	list, err := c.ListBulkJobs(ctx, &dexv1.ListBulkJobsRequest{})
	if err != nil || len(list.Jobs) != 1 || list.Jobs[0].Id != j.Id {
		t.Fatalf("list: %v, %v", list, err)
	}
	cr, err := c.CancelBulkJob(ctx, &dexv1.CancelBulkJobRequest{JobId: j.Id})
	if err != nil || cr.Job.Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_CANCELLED {
		t.Fatalf("cancel: %v, %v", cr, err)
	}
	// A job with a given id; the same id again is AlreadyExists.
	if _, err := c.StartBulkAction(ctx, &dexv1.StartBulkActionRequest{JobId: "mine", Action: dexv1.BulkAction_BULK_ACTION_DELETE, All: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		req  *dexv1.StartBulkActionRequest
		code codes.Code
		msg  string
	}{
		{"a taken id", &dexv1.StartBulkActionRequest{JobId: "mine", Action: dexv1.BulkAction_BULK_ACTION_CLOSE}, codes.AlreadyExists, "exists"},
		{"no action", &dexv1.StartBulkActionRequest{}, codes.InvalidArgument, "not one of cancel"},
		{"a delete of everything without all", &dexv1.StartBulkActionRequest{Action: dexv1.BulkAction_BULK_ACTION_DELETE}, codes.InvalidArgument, "would delete every session"},
		{"a label job without labels", &dexv1.StartBulkActionRequest{Action: dexv1.BulkAction_BULK_ACTION_LABEL}, codes.InvalidArgument, "at least one label"},
		{"a bad filter", &dexv1.StartBulkActionRequest{Action: dexv1.BulkAction_BULK_ACTION_CLOSE, Filter: &dexv1.BulkFilter{CreatedFromMs: 9, CreatedToMs: 1}}, codes.InvalidArgument, "later than"},
	} {
		_, err := c.StartBulkAction(ctx, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: %v; want %s with %q", tc.what, err, tc.code, tc.msg)
		}
	}
	if list, _ := c.ListBulkJobs(ctx, &dexv1.ListBulkJobsRequest{}); len(list.GetJobs()) != 2 {
		t.Fatalf("refused starts left jobs: %v", list)
	}
	if _, err := c.GetBulkJob(ctx, &dexv1.GetBulkJobRequest{JobId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("get of an unknown job: %v", err)
	}
	if _, err := c.CancelBulkJob(ctx, &dexv1.CancelBulkJobRequest{JobId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("cancel of an unknown job: %v", err)
	}
}

// The parts of a job in several partitions read as one.
func TestBulk_MergeSumsThePartitionsParts(t *testing.T) {
	part := func(status dexv1.BulkJobStatus, acted uint64, skip uint64, created, ended int64) *dexv1.BulkJob {
		return &dexv1.BulkJob{Id: "j", Status: status, Acted: acted, Steps: 1, CreatedAtMs: created, EndedAtMs: ended,
			Skipped: []*dexv1.BulkSkip{{Reason: "no turn in progress", Count: skip}}, Cursor: &dexv1.BulkCursor{Id: "x"}}
	}
	got := mergeBulkJobs([][]*dexv1.BulkJob{
		{part(dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE, 3, 1, 10, 20), {Id: "old", CreatedAtMs: 1, Status: dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE}},
		{part(dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING, 4, 2, 11, 0)},
	})
	if len(got) != 2 || got[0].Id != "j" || got[1].Id != "old" {
		t.Fatalf("merged: %v", got)
	}
	j := got[0]
	if j.Acted != 7 || j.Steps != 2 || j.Skipped[0].Count != 3 || j.Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING || j.EndedAtMs != 0 || j.CreatedAtMs != 10 || j.Cursor != nil {
		t.Fatalf("merged job: %v", j)
	}
	done := mergeBulkJobs([][]*dexv1.BulkJob{{part(dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE, 1, 0, 1, 5)}, {part(dexv1.BulkJobStatus_BULK_JOB_STATUS_CANCELLED, 1, 0, 1, 7)}})
	if done[0].Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_CANCELLED || done[0].EndedAtMs != 7 {
		t.Fatalf("a job with a cancelled part: %v", done[0])
	}
}
