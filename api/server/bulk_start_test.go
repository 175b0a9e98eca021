package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// fakeParts are three partitions whose calls a test scripts: startErr[k]
// fails the start in k, cancelErr[k] the cancel.
type fakeParts struct {
	startErr, cancelErr map[int]error
	acted               map[int]uint64
	ended               map[int]bool
	started, cancelled  []int
}

func (f *fakeParts) start(k int) (*dexv1.BulkJob, error) {
	if err := f.startErr[k]; err != nil {
		return nil, err
	}
	f.started = append(f.started, k)
	return &dexv1.BulkJob{Id: "job", Status: dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING}, nil
}

func (f *fakeParts) cancel(k int) (*dexv1.BulkJob, error) {
	if err := f.cancelErr[k]; err != nil {
		return nil, err
	}
	f.cancelled = append(f.cancelled, k)
	st := dexv1.BulkJobStatus_BULK_JOB_STATUS_CANCELLED
	if f.ended[k] {
		st = dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE
	}
	return &dexv1.BulkJob{Id: "job", Status: st, Acted: f.acted[k]}, nil
}

func TestStartBulkParts_AllStartInOrder(t *testing.T) {
	f := &fakeParts{}
	parts, err := startBulkParts(3, "job", f.start, f.cancel)
	if err != nil || len(parts) != 3 || !slices.Equal(f.started, []int{0, 1, 2}) || len(f.cancelled) != 0 {
		t.Fatalf("parts %v, err %v; started %v, cancelled %v", parts, err, f.started, f.cancelled)
	}
}

// A start that fails in the second of three partitions cancels the first's
// part, never starts the third's, and says the job was not started.
func TestStartBulkParts_AFailureCancelsThePartsThatStarted(t *testing.T) {
	for _, c := range []struct {
		what  string
		err   error
		code  codes.Code
		msg   string
		acted uint64
		ended bool
	}{
		{"a full table", status.Error(codes.FailedPrecondition, "100 bulk jobs are running"), codes.FailedPrecondition,
			"bulk job job was not started: partition 1: 100 bulk jobs are running; its part in partition 0 was cancelled, having acted on 0 sessions", 0, false},
		{"a partition without a leader", status.Error(codes.Unavailable, "no leader"), codes.FailedPrecondition,
			"bulk job job was not started: partition 1: no leader; its part in partition 0 was cancelled, having acted on 4 sessions; start it again", 4, false},
		{"a part that ended before its cancel", status.Error(codes.ResourceExhausted, "slow down"), codes.ResourceExhausted,
			"bulk job job was not started: partition 1: slow down; its part in partition 0 had already ended, acting on 2 sessions", 2, true},
	} {
		f := &fakeParts{startErr: map[int]error{1: c.err}, acted: map[int]uint64{0: c.acted}, ended: map[int]bool{0: c.ended}}
		parts, err := startBulkParts(3, "job", f.start, f.cancel)
		if parts != nil || !slices.Equal(f.started, []int{0}) || !slices.Equal(f.cancelled, []int{0}) {
			t.Errorf("%s: parts %v; started %v, cancelled %v; want partition 0 started and cancelled, 2 never started", c.what, parts, f.started, f.cancelled)
		}
		if st := status.Convert(err); st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("%s: %v\nwant %s: %s", c.what, err, c.code, c.msg)
		}
	}
}

// A cancel that fails is named with the part that still runs and its id;
// the other parts are still cancelled.
func TestStartBulkParts_ACancelThatFailsNamesThePartStillRunning(t *testing.T) {
	f := &fakeParts{
		startErr:  map[int]error{2: status.Error(codes.InvalidArgument, "bad")},
		cancelErr: map[int]error{0: status.Error(codes.Unavailable, "partition 0 has no leader")},
	}
	_, err := startBulkParts(3, "job", f.start, f.cancel)
	want := "bulk job job was not started: partition 2: bad; its part in partition 0 still runs (cancel it by the job id job: partition 0 has no leader); its part in partition 1 was cancelled, having acted on 0 sessions"
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != want {
		t.Fatalf("%v\nwant %s", err, want)
	}
	if !slices.Equal(f.cancelled, []int{1}) {
		t.Fatalf("cancelled %v, want partition 1's part", f.cancelled)
	}
}

// A start refused in the first partition started nothing to cancel.
func TestStartBulkParts_AFailureInTheFirstPartitionCancelsNothing(t *testing.T) {
	f := &fakeParts{startErr: map[int]error{0: fmt.Errorf("no")}}
	_, err := startBulkParts(3, "job", f.start, f.cancel)
	if len(f.cancelled) != 0 || len(f.started) != 0 || status.Convert(err).Message() != "bulk job job was not started: partition 0: no" {
		t.Fatalf("%v; started %v, cancelled %v", err, f.started, f.cancelled)
	}
}

// On a cluster of three partitions, a start whose job id partition 1
// holds already is refused there; the part partition 0 started is
// cancelled through the cancel call, and partition 2 never gets one.
func TestBulk_AStartRefusedInAPartitionCancelsTheStartedPart(t *testing.T) {
	host, conn := servePartitionsConn(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	taken := &fsmpb.BulkJob{Id: "taken", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE, By: "a test"}
	res, err := host.Partition(1).Propose(ctx, &fsmpb.Command{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_StartBulkJob{StartBulkJob: &fsmpb.StartBulkJob{Job: taken}}})
	if err != nil || res.Err != nil {
		t.Fatalf("start in partition 1: %v %v", err, res.Err)
	}
	c := dexv1.NewSessionServiceClient(conn)
	_, err = c.StartBulkAction(ctx, &dexv1.StartBulkActionRequest{JobId: "taken", Action: dexv1.BulkAction_BULK_ACTION_CANCEL, Reason: "r"})
	want := "bulk job taken was not started: partition 1: bulk job taken exists; its part in partition 0 was cancelled, having acted on 0 sessions"
	if st := status.Convert(err); st.Code() != codes.AlreadyExists || st.Message() != want {
		t.Fatalf("%v\nwant AlreadyExists: %s", err, want)
	}
	if j := host.Partition(0).State().BulkJob("taken"); j == nil || j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_CANCELLED || j.Action != fsmpb.BulkAction_BULK_ACTION_CANCEL {
		t.Fatalf("partition 0's part: %v; want the cancel job, cancelled", j)
	}
	if j := host.Partition(1).State().BulkJob("taken"); j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_RUNNING || j.Action != fsmpb.BulkAction_BULK_ACTION_CLOSE {
		t.Fatalf("partition 1's own job changed: %v", j)
	}
	if j := host.Partition(2).State().BulkJob("taken"); j != nil {
		t.Fatalf("partition 2 got a part: %v", j)
	}
}
