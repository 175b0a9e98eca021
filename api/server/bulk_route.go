package server

import (
	"cmp"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

const (
	startBulkMethod  = "/dex.v1.SessionService/StartBulkAction"
	cancelBulkMethod = "/dex.v1.SessionService/CancelBulkJob"
)

// bulkAnswers are the answers of the bulk calls.
var bulkAnswers = map[string]func() proto.Message{
	startBulkMethod:                       func() proto.Message { return &dexv1.StartBulkActionResponse{} },
	"/dex.v1.SessionService/GetBulkJob":   func() proto.Message { return &dexv1.GetBulkJobResponse{} },
	"/dex.v1.SessionService/ListBulkJobs": func() proto.Message { return &dexv1.ListBulkJobsResponse{} },
	cancelBulkMethod:                      func() proto.Message { return &dexv1.CancelBulkJobResponse{} },
}

// bulk serves a bulk call: in a cluster of one partition, there; in one of
// several, in each partition in order, a start with the one job id drawn
// here (after the request is checked, so bad input starts nothing
// anywhere), the answers summed into one job per id. A start that fails
// in a partition cancels the parts started before it (bulk_start.go).
func (r *Router) bulk(ss grpc.ServerStream, method string, req *frame) error {
	if len(r.parts) == 1 {
		return r.serveIn(0, ss, method, req)
	}
	answer, ok := bulkAnswers[method]
	if !ok {
		return status.Errorf(codes.Internal, "%s is not a bulk call", method)
	}
	if method == startBulkMethod {
		var in dexv1.StartBulkActionRequest
		if err := decodeFrame(req, &in); err != nil {
			return status.Errorf(codes.InvalidArgument, "decode the request: %v", err)
		}
		job, err := bulkJobOf(&in)
		if err != nil {
			return err
		}
		in.JobId = job.Id
		b, err := proto.Marshal(&in)
		if err != nil {
			return status.Errorf(codes.Internal, "encode the request: %v", err)
		}
		started, err := r.startBulkInEvery(ss, job.Id, &frame{b: b})
		if err != nil {
			return err
		}
		return ss.SendMsg(&dexv1.StartBulkActionResponse{Job: started})
	}
	var jobs [][]*dexv1.BulkJob
	for k := range r.parts {
		out := answer()
		if err := r.callIn(ss, k, method, req, out); err != nil {
			return inPartition(k, err)
		}
		switch o := out.(type) {
		case *dexv1.GetBulkJobResponse:
			jobs = append(jobs, []*dexv1.BulkJob{o.Job})
		case *dexv1.CancelBulkJobResponse:
			jobs = append(jobs, []*dexv1.BulkJob{o.Job})
		case *dexv1.ListBulkJobsResponse:
			jobs = append(jobs, o.Jobs)
		}
	}
	merged := mergeBulkJobs(jobs)
	var resp proto.Message
	switch method {
	case "/dex.v1.SessionService/GetBulkJob":
		resp = &dexv1.GetBulkJobResponse{Job: first(merged)}
	case cancelBulkMethod:
		resp = &dexv1.CancelBulkJobResponse{Job: first(merged)}
	default:
		resp = &dexv1.ListBulkJobsResponse{Jobs: merged}
	}
	return ss.SendMsg(resp)
}

func first(jobs []*dexv1.BulkJob) *dexv1.BulkJob {
	if len(jobs) == 0 {
		return nil
	}
	return jobs[0]
}

// mergeBulkJobs sums the partitions' parts of each job: counts added, the
// job running while a part runs, cancelled when a part was, done when
// every part is; newest first. The cursor is a partition's own and is
// left out.
func mergeBulkJobs(parts [][]*dexv1.BulkJob) []*dexv1.BulkJob {
	byID := map[string]*dexv1.BulkJob{}
	var out []*dexv1.BulkJob
	for _, list := range parts {
		for _, p := range list {
			if p == nil {
				continue
			}
			m := byID[p.Id]
			if m == nil {
				m = proto.Clone(p).(*dexv1.BulkJob)
				m.Cursor = nil
				byID[p.Id] = m
				out = append(out, m)
				continue
			}
			m.Acted += p.Acted
			m.Failed += p.Failed
			m.Steps += p.Steps
			for _, s := range p.Skipped {
				if i := slices.IndexFunc(m.Skipped, func(x *dexv1.BulkSkip) bool { return x.Reason == s.Reason }); i >= 0 {
					m.Skipped[i].Count += s.Count
				} else {
					m.Skipped = append(m.Skipped, proto.Clone(s).(*dexv1.BulkSkip))
				}
			}
			m.CreatedAtMs = min(m.CreatedAtMs, p.CreatedAtMs)
			m.UpdatedAtMs = max(m.UpdatedAtMs, p.UpdatedAtMs)
			m.EndedAtMs = max(m.EndedAtMs, p.EndedAtMs)
			m.Status = mergedStatus(m.Status, p.Status)
			if m.CancelledBy == "" {
				m.CancelledBy = p.CancelledBy
			}
		}
	}
	for _, m := range out {
		if m.Status == dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING {
			m.EndedAtMs = 0
		}
	}
	slices.SortStableFunc(out, func(a, b *dexv1.BulkJob) int {
		return cmp.Or(cmp.Compare(b.CreatedAtMs, a.CreatedAtMs), strings.Compare(a.Id, b.Id))
	})
	return out
}

// mergedStatus: running wins, then cancelled, then done.
func mergedStatus(a, b dexv1.BulkJobStatus) dexv1.BulkJobStatus {
	rank := func(s dexv1.BulkJobStatus) int {
		switch s {
		case dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING:
			return 3
		case dexv1.BulkJobStatus_BULK_JOB_STATUS_CANCELLED:
			return 2
		}
		return 1
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
