package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Bulk actions (docs/bulk.md). These handlers serve one partition: its job
// acts on the partition's sessions. The router starts, reads and cancels a
// job in every partition under one id (bulk_route.go).

// StartBulkAction starts a bulk job in this partition.
func (s *Sessions) StartBulkAction(ctx context.Context, req *dexv1.StartBulkActionRequest) (*dexv1.StartBulkActionResponse, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if !s.node.MembersApply(fsm.BulkLogVersion) {
		return nil, status.Errorf(codes.FailedPrecondition, "a member of the cluster runs a Dex that cannot apply a bulk job (log version below %d): upgrade every node, then start it", fsm.BulkLogVersion)
	}
	job, err := bulkJobOf(req)
	if err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_StartBulkJob{StartBulkJob: &fsmpb.StartBulkJob{Job: job}}}); err != nil {
		return nil, err
	}
	return &dexv1.StartBulkActionResponse{Job: s.node.State().BulkJob(job.Id).API()}, nil
}

// bulkJobOf is the job a request asks for, checked: bad input is
// InvalidArgument.
func bulkJobOf(req *dexv1.StartBulkActionRequest) (*fsmpb.BulkJob, error) {
	id := req.JobId
	if id == "" {
		id = newBulkJobID()
	}
	job := &fsmpb.BulkJob{
		Id: id, Action: fsmpb.BulkAction(req.Action), Filter: fsmpb.BulkFilterFromAPI(req.Filter),
		Labels: labelsFromAPI(req.Labels), Reason: req.Reason, By: "bulk job " + id,
	}
	if r := fsm.CheckBulkJob(job); r != nil {
		return nil, status.Error(codes.InvalidArgument, r.Reason)
	}
	if job.Action == fsmpb.BulkAction_BULK_ACTION_DELETE && fsm.EmptyBulkFilter(job.Filter) && !req.All {
		return nil, status.Error(codes.InvalidArgument, "a delete with no filter would delete every session: give a filter, or set all to delete them all")
	}
	return job, nil
}

// newBulkJobID draws a job id: the router draws it before it starts the
// job in each partition, so every partition's part has the same one.
func newBulkJobID() string { return "bulk-" + wirerules.NewSessionID() }

// GetBulkJob reads this partition's part of a job.
func (s *Sessions) GetBulkJob(ctx context.Context, req *dexv1.GetBulkJobRequest) (*dexv1.GetBulkJobResponse, error) {
	if err := required("job_id", req.JobId); err != nil {
		return nil, err
	}
	j := s.node.State().BulkJob(req.JobId)
	if j == nil {
		return nil, status.Errorf(codes.NotFound, "bulk job %q not found", req.JobId)
	}
	return &dexv1.GetBulkJobResponse{Job: j.API()}, nil
}

// ListBulkJobs lists this partition's jobs, newest first.
func (s *Sessions) ListBulkJobs(ctx context.Context, _ *dexv1.ListBulkJobsRequest) (*dexv1.ListBulkJobsResponse, error) {
	out := &dexv1.ListBulkJobsResponse{}
	for _, j := range s.node.State().BulkJobs() {
		out.Jobs = append(out.Jobs, j.API())
	}
	return out, nil
}

// CancelBulkJob stops this partition's part of a running job.
func (s *Sessions) CancelBulkJob(ctx context.Context, req *dexv1.CancelBulkJobRequest) (*dexv1.CancelBulkJobResponse, error) {
	if err := required("job_id", req.JobId); err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_CancelBulkJob{CancelBulkJob: &fsmpb.CancelBulkJob{JobId: req.JobId, By: "a client"}}}); err != nil {
		return nil, err
	}
	return &dexv1.CancelBulkJobResponse{Job: s.node.State().BulkJob(req.JobId).API()}, nil
}
