package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// rollbackTimeout bounds the cancels of a start that failed part-way.
const rollbackTimeout = 10 * time.Second

// partCall makes a bulk call in partition k and returns that partition's
// part of the job.
type partCall func(k int) (*dexv1.BulkJob, error)

// startBulkParts starts a job's part in partitions 0 to n-1 in turn, all
// or nothing as the caller sees it: when the start fails in a partition,
// the parts that started are cancelled (their sessions already acted on
// stay as they are) and the error says the job was not started, why, and
// any part a cancel could not stop.
func startBulkParts(n int, jobID string, start, cancel partCall) ([]*dexv1.BulkJob, error) {
	var started []*dexv1.BulkJob
	for k := range n {
		j, err := start(k)
		if err != nil {
			return nil, notStarted(jobID, k, err, started, cancel)
		}
		started = append(started, j)
	}
	return started, nil
}

// notStarted cancels the parts started before partition failed did, and is
// the error to return. The code is the failing partition's, except that a
// code the clients retry becomes FailedPrecondition: a retry names the
// same job id, which the cancelled parts keep, so it could only meet
// AlreadyExists; a new start (a new id) is the way to try again.
func notStarted(jobID string, failed int, err error, started []*dexv1.BulkJob, cancel partCall) error {
	st := status.Convert(err)
	var b strings.Builder
	fmt.Fprintf(&b, "bulk job %s was not started: partition %d: %s", jobID, failed, st.Message())
	for k := range started {
		j, cerr := cancel(k)
		switch {
		case cerr != nil:
			fmt.Fprintf(&b, "; its part in partition %d still runs (cancel it by the job id %s: %s)", k, jobID, status.Convert(cerr).Message())
		case j.GetStatus() == dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE:
			fmt.Fprintf(&b, "; its part in partition %d had already ended, acting on %d sessions", k, j.GetActed())
		default:
			fmt.Fprintf(&b, "; its part in partition %d was cancelled, having acted on %d sessions", k, j.GetActed())
		}
	}
	code := st.Code()
	switch code {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.Canceled:
		code = codes.FailedPrecondition
		b.WriteString("; start it again")
	}
	return status.Error(code, b.String())
}

// startBulkInEvery is the router's start of a job in every partition;
// req names the job's id already.
func (r *Router) startBulkInEvery(ss grpc.ServerStream, jobID string, req *frame) (*dexv1.BulkJob, error) {
	start := func(k int) (*dexv1.BulkJob, error) {
		var out dexv1.StartBulkActionResponse
		err := r.callIn(ss, k, startBulkMethod, req, &out)
		return out.Job, err
	}
	// The cancels outlive the caller's context: a start that failed on the
	// caller's deadline must still stop the parts it started.
	ctx, done := context.WithTimeout(context.WithoutCancel(ss.Context()), rollbackTimeout)
	defer done()
	cancelReq, err := proto.Marshal(&dexv1.CancelBulkJobRequest{JobId: jobID})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode the request: %v", err)
	}
	cancel := func(k int) (*dexv1.BulkJob, error) {
		var out dexv1.CancelBulkJobResponse
		err := r.callIn(&contextStream{ServerStream: ss, ctx: ctx}, k, cancelBulkMethod, &frame{b: cancelReq}, &out)
		return out.Job, err
	}
	parts, err := startBulkParts(len(r.parts), jobID, start, cancel)
	if err != nil {
		return nil, err
	}
	return first(mergeBulkJobs([][]*dexv1.BulkJob{parts})), nil
}

// contextStream is a stream whose context is ctx.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }
