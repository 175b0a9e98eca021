package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// ReportTask ends an attempt with its Worker's result or failure: one
// ReportAttempt command, whichever way the attempt ended.
func (w *Workers) ReportTask(ctx context.Context, req *dexv1.ReportTaskRequest) (*dexv1.ReportTaskResponse, error) {
	if err := validRef(req.Ref); err != nil {
		return nil, err
	}
	if req.GetResult().GetOutcome() == nil {
		return nil, status.Error(codes.InvalidArgument, "a result (an output or a failure) is required")
	}
	// A bad model output is refused before it reaches the log.
	if r := fsm.CheckModelOutput(req.GetResult().GetModelOutput().GetToolCalls()); r != nil {
		return nil, status.Error(codes.InvalidArgument, r.Reason)
	}
	w.touchRef(req.Ref)
	failpoint(FailpointBeforeCommitResult)
	result := fsmpb.AttemptResultFromAPI(req.Result)
	if f := result.GetFailure(); f != nil {
		f.Error = cutErrorText(f.Error)
	}
	if _, err := w.proposeAttempt(ctx, &fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{
		Ref: fsmpb.AttemptRefFromAPI(req.Ref), Result: result,
	}}}); err != nil {
		return nil, err
	}
	w.deadlines.Release(req.Ref.StepId, req.Ref.Attempt)
	return &dexv1.ReportTaskResponse{}, nil
}

// CompleteTask is the older Workers' success report, served as a ReportTask.
func (w *Workers) CompleteTask(ctx context.Context, req *dexv1.CompleteTaskRequest) (*dexv1.CompleteTaskResponse, error) {
	res := &dexv1.AttemptResult{}
	switch r := req.Result.(type) {
	case *dexv1.CompleteTaskRequest_ModelOutput:
		res.Outcome = &dexv1.AttemptResult_ModelOutput{ModelOutput: r.ModelOutput}
	case *dexv1.CompleteTaskRequest_ToolResult:
		res.Outcome = &dexv1.AttemptResult_ToolResult{ToolResult: r.ToolResult}
	case *dexv1.CompleteTaskRequest_PollResult:
		res.Outcome = &dexv1.AttemptResult_PollResult{PollResult: r.PollResult}
	case *dexv1.CompleteTaskRequest_Summary:
		res.Outcome = &dexv1.AttemptResult_Summary{Summary: r.Summary}
	}
	if _, err := w.ReportTask(ctx, &dexv1.ReportTaskRequest{Ref: req.Ref, Result: res}); err != nil {
		return nil, err
	}
	return &dexv1.CompleteTaskResponse{}, nil
}

// FailTask is the older Workers' failure report, served as a ReportTask.
func (w *Workers) FailTask(ctx context.Context, req *dexv1.FailTaskRequest) (*dexv1.FailTaskResponse, error) {
	res := &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_Failure{Failure: &dexv1.AttemptFailure{
		ErrorType: req.ErrorType, Error: req.Error,
	}}}
	if _, err := w.ReportTask(ctx, &dexv1.ReportTaskRequest{Ref: req.Ref, Result: res}); err != nil {
		return nil, err
	}
	return &dexv1.FailTaskResponse{}, nil
}
