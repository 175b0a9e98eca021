package console

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The fake's bulk jobs, with the API's rules for what the console shows. A
// job starts running with nothing done; runJobs carries out the running
// ones, as the leader's steps would.

func (f *fakeAPI) StartBulkAction(ctx context.Context, req *dexv1.StartBulkActionRequest) (*dexv1.StartBulkActionResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	if req.Action == dexv1.BulkAction_BULK_ACTION_UNSPECIFIED {
		return nil, status.Error(codes.InvalidArgument, "a bulk job needs an action")
	}
	if req.Reason != "" && req.Action != dexv1.BulkAction_BULK_ACTION_CANCEL {
		return nil, status.Error(codes.InvalidArgument, "a reason is for a cancel job")
	}
	if err := checkFakeLabels(req.Labels); err != nil {
		return nil, err
	}
	if err := checkFakeLabels(req.Filter.GetLabels()); err != nil {
		return nil, err
	}
	bf := req.Filter
	if err := filterOfBulk(bf).check(); err != nil {
		return nil, err
	}
	empty := filterOfBulk(bf).empty()
	if req.Action == dexv1.BulkAction_BULK_ACTION_DELETE && empty && !req.All {
		return nil, status.Error(codes.InvalidArgument, "a delete with no filter would delete every session: give a filter, or set all to delete them all")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.ContainsFunc(f.jobs, func(j *dexv1.BulkJob) bool { return j.Id == req.JobId }) {
		return nil, status.Errorf(codes.AlreadyExists, "bulk job %q already exists", req.JobId)
	}
	j := &dexv1.BulkJob{Id: req.JobId, Action: req.Action, Filter: bf, Labels: req.Labels, Reason: req.Reason, Status: dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING, CreatedAtMs: 8000}
	f.jobs = append([]*dexv1.BulkJob{j}, f.jobs...)
	f.calls = append(f.calls, fmt.Sprintf("bulk %s filter={%s} labels=%s reason=%s all=%v", enumWord(req.Action.String(), "BULK_ACTION_"), filterText(bf), labelsLine(req.Labels), req.Reason, req.All))
	return &dexv1.StartBulkActionResponse{Job: proto.Clone(j).(*dexv1.BulkJob)}, nil
}

func (f *fakeAPI) job(id string) (*dexv1.BulkJob, error) {
	for _, j := range f.jobs {
		if j.Id == id {
			return j, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "bulk job %q not found", id)
}

func (f *fakeAPI) GetBulkJob(ctx context.Context, req *dexv1.GetBulkJobRequest) (*dexv1.GetBulkJobResponse, error) {
	if err := f.authorize(ctx, false); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j, err := f.job(req.JobId)
	if err != nil {
		return nil, err
	}
	return &dexv1.GetBulkJobResponse{Job: proto.Clone(j).(*dexv1.BulkJob)}, nil
}

func (f *fakeAPI) ListBulkJobs(ctx context.Context, _ *dexv1.ListBulkJobsRequest) (*dexv1.ListBulkJobsResponse, error) {
	if err := f.authorize(ctx, false); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &dexv1.ListBulkJobsResponse{}
	for _, j := range f.jobs {
		out.Jobs = append(out.Jobs, proto.Clone(j).(*dexv1.BulkJob))
	}
	return out, nil
}

func (f *fakeAPI) CancelBulkJob(ctx context.Context, req *dexv1.CancelBulkJobRequest) (*dexv1.CancelBulkJobResponse, error) {
	if err := f.authorize(ctx, true); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j, err := f.job(req.JobId)
	if err != nil {
		return nil, err
	}
	if j.Status == dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING {
		j.Status, j.CancelledBy, j.EndedAtMs = dexv1.BulkJobStatus_BULK_JOB_STATUS_CANCELLED, "a client", 9000
		f.calls = append(f.calls, "cancel job "+j.Id)
	}
	return &dexv1.CancelBulkJobResponse{Job: proto.Clone(j).(*dexv1.BulkJob)}, nil
}

// runJobs carries out the running jobs: each matching session is acted on
// or skipped, as docs/bulk.md says (cancel and label only here).
func (f *fakeAPI) runJobs() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING {
			continue
		}
		skipped := map[string]uint64{}
		for _, got := range f.sessions {
			s := got.Session
			if !filterOfBulk(j.Filter).matches(s) {
				continue
			}
			switch j.Action {
			case dexv1.BulkAction_BULK_ACTION_CANCEL:
				if s.Turn == nil {
					skipped["no turn in progress"]++
					continue
				}
				s.Turn, s.Status = nil, dexv1.SessionStatus_SESSION_STATUS_IDLE
			case dexv1.BulkAction_BULK_ACTION_LABEL:
				s.Labels = append(s.Labels, j.Labels...)
			}
			j.Acted++
		}
		for reason, n := range skipped {
			j.Skipped = append(j.Skipped, &dexv1.BulkSkip{Reason: reason, Count: n})
		}
		j.Status, j.Steps, j.EndedAtMs = dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE, 1, 9000
	}
}
