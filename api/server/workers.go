package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/dispatch"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Dispatch hands queued Steps to Workers (the leader's dispatcher).
type Dispatch interface {
	Poll(ctx context.Context, workerID string, max int, wait time.Duration) ([]*dexv1.Task, error)
}

// Deadlines keeps attempt deadlines in the leader's memory.
type Deadlines interface {
	Heartbeat(ref *dexv1.AttemptRef) (cancelled bool, reason string)
	Release(stepID string, attempt uint32)
}

// WorkerTiming tells Workers how often to heartbeat.
type WorkerTiming struct {
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
}

// maxTasksPerPoll caps one poll.
const maxTasksPerPoll = 16

// Workers implements dexv1.WorkerServiceServer.
type Workers struct {
	dexv1.UnimplementedWorkerServiceServer
	readyGate
	dispatch  Dispatch
	deadlines Deadlines
	timing    WorkerTiming
	live      Liveness   // nil: Worker TTLs are not kept
	outputs   OutputHubs // nil: no live output
}

// NewWorkers returns the Worker handlers of node.
func NewWorkers(node *cluster.Node, d Dispatch, l Deadlines, timing WorkerTiming) *Workers {
	return &Workers{readyGate: readyGate{node: node}, dispatch: d, deadlines: l, timing: timing}
}

func (w *Workers) RegisterWorker(ctx context.Context, req *dexv1.RegisterWorkerRequest) (*dexv1.RegisterWorkerResponse, error) {
	_, err := w.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: req.WorkerId, Tools: fsmpb.ToolSpecsFromAPI(req.Tools), RunsModel: req.RunsModel, ModelRunTimeoutMs: req.ModelRunTimeoutMs,
		Agents: req.Agents,
	}}})
	if err != nil {
		return nil, err
	}
	w.touch(req.WorkerId)
	me := w.node.Info()
	return &dexv1.RegisterWorkerResponse{
		HeartbeatIntervalMs: uint32(w.timing.HeartbeatInterval.Milliseconds()),
		HeartbeatTimeoutMs:  uint32(w.timing.HeartbeatTimeout.Milliseconds()),
		NodeId:              me.Id,
		NodeAddress:         me.GrpcAddress,
	}, nil
}

// DeregisterWorker is the TTL's deregistration asked for by the Worker
// itself as it stops cleanly, so that it does not look alive until the TTL
// runs out. It commits the same command under the epoch of this dispatch lease holder.
func (w *Workers) DeregisterWorker(ctx context.Context, req *dexv1.DeregisterWorkerRequest) (*dexv1.DeregisterWorkerResponse, error) {
	if err := w.check(ctx); err != nil {
		return nil, err
	}
	if err := required("worker_id", req.WorkerId); err != nil {
		return nil, err
	}
	if w.node.State().Worker(req.WorkerId) == nil {
		return &dexv1.DeregisterWorkerResponse{}, nil // gone already: a repeat
	}
	_, err := w.commit(ctx, &fsmpb.Command{Body: &fsmpb.Command_DeregisterWorker{DeregisterWorker: &fsmpb.DeregisterWorker{
		WorkerId: req.WorkerId, Epoch: w.node.State().Meta().GetEpoch(),
	}}})
	if status.Code(err) == codes.NotFound {
		err = nil // deregistered meanwhile (its TTL ran out)
	}
	if err != nil {
		return nil, err
	}
	return &dexv1.DeregisterWorkerResponse{}, nil
}

func (w *Workers) PollTask(ctx context.Context, req *dexv1.PollTaskRequest) (*dexv1.PollTaskResponse, error) {
	if err := w.check(ctx); err != nil {
		return nil, err
	}
	if err := required("worker_id", req.WorkerId); err != nil {
		return nil, err
	}
	max := int(req.MaxTasks)
	if max <= 0 {
		max = 1
	}
	if max > maxTasksPerPoll {
		max = maxTasksPerPoll
	}
	defer w.polling(req.WorkerId)()
	tasks, err := w.dispatch.Poll(ctx, req.WorkerId, max, time.Duration(req.WaitMs)*time.Millisecond)
	switch {
	case err == nil:
	case errors.Is(err, dispatch.ErrUnknownWorker):
		return nil, status.Errorf(codes.FailedPrecondition, "worker %q is not registered: register first", req.WorkerId)
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, dispatch.ErrNotLeader):
		return nil, w.unavailable(ctx, "the dispatch lease moved")
	default:
		// A proposal that did not commit: the Worker polls again.
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &dexv1.PollTaskResponse{Tasks: tasks}, nil
}

func validRef(ref *dexv1.AttemptRef) error {
	if ref == nil || ref.StepId == "" || ref.Attempt == 0 || ref.Token == "" {
		return status.Error(codes.InvalidArgument, "ref needs step_id, attempt and token")
	}
	return nil
}

func (w *Workers) ClaimTask(ctx context.Context, req *dexv1.ClaimTaskRequest) (*dexv1.ClaimTaskResponse, error) {
	if err := validRef(req.Ref); err != nil {
		return nil, err
	}
	w.touchRef(req.Ref)
	if _, err := w.proposeAttempt(ctx, &fsmpb.Command{Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{Ref: fsmpb.AttemptRefFromAPI(req.Ref)}}}); err != nil {
		return nil, err
	}
	w.deadlines.Heartbeat(req.Ref)
	return &dexv1.ClaimTaskResponse{}, nil
}

func (w *Workers) Heartbeat(ctx context.Context, req *dexv1.HeartbeatRequest) (*dexv1.HeartbeatResponse, error) {
	if err := w.checkAttempt(ctx); err != nil {
		return nil, err
	}
	if err := validRef(req.Ref); err != nil {
		return nil, err
	}
	w.touchRef(req.Ref)
	cancelled, reason := w.deadlines.Heartbeat(req.Ref)
	return &dexv1.HeartbeatResponse{Cancelled: cancelled, Reason: reason}, nil
}
