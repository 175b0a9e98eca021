package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// StartBulkAction starts a bulk job (docs/bulk.md): one action on every
// session req's filter matches. The client draws the job id when req names
// none, so the call is retried safely: a repeat that finds the job an
// earlier try started returns it.
func (c *Client) StartBulkAction(ctx context.Context, req *dexv1.StartBulkActionRequest) (*dexv1.BulkJob, error) {
	if req.JobId == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		req.JobId = "bulk-" + hex.EncodeToString(b[:])
	}
	tries := 0
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.StartBulkActionResponse, error) {
		tries++
		return c.svc.StartBulkAction(ctx, req, o...)
	})
	if err == nil {
		return resp.Job, nil
	}
	if tries > 1 && status.Code(err) == codes.AlreadyExists {
		if got, gerr := c.GetBulkJob(ctx, req.JobId); gerr == nil && got.Action == req.Action {
			return got, nil
		}
	}
	return nil, err
}

// GetBulkJob reads a job and its progress.
func (c *Client) GetBulkJob(ctx context.Context, id string) (*dexv1.BulkJob, error) {
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.GetBulkJobResponse, error) {
		return c.svc.GetBulkJob(ctx, &dexv1.GetBulkJobRequest{JobId: id}, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Job, nil
}

// ListBulkJobs lists the jobs the cluster keeps, newest first.
func (c *Client) ListBulkJobs(ctx context.Context) ([]*dexv1.BulkJob, error) {
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.ListBulkJobsResponse, error) {
		return c.svc.ListBulkJobs(ctx, &dexv1.ListBulkJobsRequest{}, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Jobs, nil
}

// CancelBulkJob stops a running job (an ended one is left as it is).
func (c *Client) CancelBulkJob(ctx context.Context, id string) (*dexv1.BulkJob, error) {
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.CancelBulkJobResponse, error) {
		return c.svc.CancelBulkJob(ctx, &dexv1.CancelBulkJobRequest{JobId: id}, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Job, nil
}

// WaitBulkJob reads a job every interval until it is no longer running,
// calling progress (when not nil) with each read, and returns the job as
// it ended.
func (c *Client) WaitBulkJob(ctx context.Context, id string, interval time.Duration, progress func(*dexv1.BulkJob)) (*dexv1.BulkJob, error) {
	for {
		j, err := c.GetBulkJob(ctx, id)
		if err != nil {
			return nil, err
		}
		if progress != nil {
			progress(j)
		}
		if j.Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING {
			return j, nil
		}
		if err := sleep(ctx, interval); err != nil {
			return nil, err
		}
	}
}
