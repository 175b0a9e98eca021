package fsmpb

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The parts of the stored rows and of the log's commands, converted to or
// from the dex.v1 messages of the same name (same fields, same numbers), the
// way each flows: a row's parts to the API, where it shows them or hands
// them to a Worker; a Worker's report, a registered tool and a node's
// addresses from it, where they are proposed. A nil part converts to nil.

// convertAll converts each element of a list; an empty list stays nil.
func convertAll[F, T any](in []F, convert func(F) T) []T {
	if len(in) == 0 {
		return nil
	}
	out := make([]T, len(in))
	for i, x := range in {
		out[i] = convert(x)
	}
	return out
}

// ToolSpecsFromAPI is a Worker's registered tools as the state stores them.
func ToolSpecsFromAPI(ts []*dexv1.ToolSpec) []*ToolSpec { return convertAll(ts, ToolSpecFromAPI) }

// AttemptResultFromAPI is a Worker's report of how its attempt ended, as
// the log carries it.
func AttemptResultFromAPI(x *dexv1.AttemptResult) *AttemptResult {
	if x == nil {
		return nil
	}
	out := &AttemptResult{}
	switch o := x.Outcome.(type) {
	case *dexv1.AttemptResult_ModelOutput:
		out.Outcome = &AttemptResult_ModelOutput{ModelOutput: ModelOutputFromAPI(o.ModelOutput)}
	case *dexv1.AttemptResult_ToolResult:
		out.Outcome = &AttemptResult_ToolResult{ToolResult: ToolResultFromAPI(o.ToolResult)}
	case *dexv1.AttemptResult_PollResult:
		out.Outcome = &AttemptResult_PollResult{PollResult: PollResultFromAPI(o.PollResult)}
	case *dexv1.AttemptResult_Summary:
		out.Outcome = &AttemptResult_Summary{Summary: o.Summary}
	case *dexv1.AttemptResult_Failure:
		out.Outcome = &AttemptResult_Failure{Failure: AttemptFailureFromAPI(o.Failure)}
	}
	return out
}

// API is a session's turn as the API shows it.
func (x *Turn) API() *dexv1.Turn {
	if x == nil {
		return nil
	}
	return &dexv1.Turn{
		Number:         x.Number,
		Input:          dexv1.TurnInput(x.Input),
		MessageIds:     x.MessageIds,
		Calls:          convertAll(x.Calls, (*CallState).API),
		StepId:         x.StepId,
		RanCalls:       x.RanCalls,
		NotedRanCalls:  x.NotedRanCalls,
		ResultsFromSeq: x.ResultsFromSeq,
	}
}

// API is a turn's tool call as the API shows it.
func (x *CallState) API() *dexv1.CallState {
	if x == nil {
		return nil
	}
	return &dexv1.CallState{
		CallId:         x.CallId,
		Tool:           x.Tool,
		Arguments:      x.Arguments,
		Policy:         x.Policy.API(),
		Phase:          dexv1.CallPhase(x.Phase),
		StepId:         x.StepId,
		TaskId:         x.TaskId,
		Outcome:        dexv1.Outcome(x.Outcome),
		Content:        x.Content,
		IdempotencyKey: x.IdempotencyKey,
		Ran:            x.Ran,
		Builtin:        x.Builtin,
	}
}

// API is a Step's attempt as the API shows it.
func (x *Attempt) API() *dexv1.Attempt {
	if x == nil {
		return nil
	}
	return &dexv1.Attempt{
		N:           x.N,
		WorkerId:    x.WorkerId,
		Epoch:       x.Epoch,
		Token:       x.Token,
		Status:      dexv1.AttemptStatus(x.Status),
		Progress:    dexv1.AttemptProgress(x.Progress),
		StartedAtMs: x.StartedAtMs,
		ClaimedAtMs: x.ClaimedAtMs,
		EndedAtMs:   x.EndedAtMs,
		ErrorType:   dexv1.ErrorType(x.ErrorType),
		Error:       x.Error,
		LastSeq:     x.LastSeq,
		LastCall:    x.LastCall,
		DeadlineMs:  x.DeadlineMs,
	}
}

// API is a tool's policy as the API shows it.
func (x *ToolSpec) API() *dexv1.ToolSpec {
	if x == nil {
		return nil
	}
	return &dexv1.ToolSpec{
		Name:           x.Name,
		Access:         dexv1.ToolAccess(x.Access),
		NeedsApproval:  x.NeedsApproval,
		LongRunning:    x.LongRunning,
		Inline:         x.Inline,
		MaxAttempts:    x.MaxAttempts,
		PollIntervalMs: x.PollIntervalMs,
		Description:    x.Description,
		RunTimeoutMs:   x.RunTimeoutMs,
		Agents:         x.Agents,
	}
}

// ToolSpecFromAPI is a tool's policy as the state stores it.
func ToolSpecFromAPI(x *dexv1.ToolSpec) *ToolSpec {
	if x == nil {
		return nil
	}
	return &ToolSpec{
		Name:           x.Name,
		Access:         ToolAccess(x.Access),
		NeedsApproval:  x.NeedsApproval,
		LongRunning:    x.LongRunning,
		Inline:         x.Inline,
		MaxAttempts:    x.MaxAttempts,
		PollIntervalMs: x.PollIntervalMs,
		Description:    x.Description,
		RunTimeoutMs:   x.RunTimeoutMs,
		Agents:         x.Agents,
	}
}

// API is a model output's tool call as the API shows it.
func (x *ToolCall) API() *dexv1.ToolCall {
	if x == nil {
		return nil
	}
	return &dexv1.ToolCall{
		CallId:    x.CallId,
		Tool:      x.Tool,
		Arguments: x.Arguments,
	}
}

// ToolCallFromAPI is a model output's tool call as the state stores it.
func ToolCallFromAPI(x *dexv1.ToolCall) *ToolCall {
	if x == nil {
		return nil
	}
	return &ToolCall{
		CallId:    x.CallId,
		Tool:      x.Tool,
		Arguments: x.Arguments,
	}
}

// API is an inline result as the API shows it.
func (x *InlineResult) API() *dexv1.InlineResult {
	if x == nil {
		return nil
	}
	return &dexv1.InlineResult{
		CallId:    x.CallId,
		Tool:      x.Tool,
		Arguments: x.Arguments,
		Content:   x.Content,
		IsError:   x.IsError,
	}
}

// InlineResultFromAPI is an inline result as the state stores it.
func InlineResultFromAPI(x *dexv1.InlineResult) *InlineResult {
	if x == nil {
		return nil
	}
	return &InlineResult{
		CallId:    x.CallId,
		Tool:      x.Tool,
		Arguments: x.Arguments,
		Content:   x.Content,
		IsError:   x.IsError,
	}
}

// API is a registered Worker as the API shows it.
func (x *WorkerInfo) API() *dexv1.WorkerInfo {
	if x == nil {
		return nil
	}
	return &dexv1.WorkerInfo{
		Id:                x.Id,
		Tools:             convertAll(x.Tools, (*ToolSpec).API),
		RegisteredAtMs:    x.RegisteredAtMs,
		RunsModel:         x.RunsModel,
		ModelRunTimeoutMs: x.ModelRunTimeoutMs,
		Agents:            x.Agents,
	}
}

// API is a node as the API shows it.
func (x *NodeInfo) API() *dexv1.NodeInfo {
	if x == nil {
		return nil
	}
	return &dexv1.NodeInfo{
		Id:          x.Id,
		RaftAddress: x.RaftAddress,
		GrpcAddress: x.GrpcAddress,
		HttpAddress: x.HttpAddress,
	}
}

// NodeInfoFromAPI is a node as the state stores it.
func NodeInfoFromAPI(x *dexv1.NodeInfo) *NodeInfo {
	if x == nil {
		return nil
	}
	return &NodeInfo{
		Id:          x.Id,
		RaftAddress: x.RaftAddress,
		GrpcAddress: x.GrpcAddress,
		HttpAddress: x.HttpAddress,
	}
}

// AttemptRefFromAPI is an attempt reference as the state stores it.
func AttemptRefFromAPI(x *dexv1.AttemptRef) *AttemptRef {
	if x == nil {
		return nil
	}
	return &AttemptRef{
		StepId:  x.StepId,
		Attempt: x.Attempt,
		Token:   x.Token,
		Seq:     x.Seq,
	}
}

// ModelOutputFromAPI is a model output as the state stores it.
func ModelOutputFromAPI(x *dexv1.ModelOutput) *ModelOutput {
	if x == nil {
		return nil
	}
	return &ModelOutput{
		Text:          x.Text,
		ToolCalls:     convertAll(x.ToolCalls, ToolCallFromAPI),
		InlineResults: convertAll(x.InlineResults, InlineResultFromAPI),
	}
}

// ToolResultFromAPI is a tool result as the state stores it.
func ToolResultFromAPI(x *dexv1.ToolResult) *ToolResult {
	if x == nil {
		return nil
	}
	return &ToolResult{
		Content: x.Content,
		IsError: x.IsError,
		TaskId:  x.TaskId,
	}
}

// PollResultFromAPI is a poll result as the state stores it.
func PollResultFromAPI(x *dexv1.PollResult) *PollResult {
	if x == nil {
		return nil
	}
	return &PollResult{
		Done:   x.Done,
		Result: ToolResultFromAPI(x.Result),
	}
}

// AttemptFailureFromAPI is an attempt failure as the state stores it.
func AttemptFailureFromAPI(x *dexv1.AttemptFailure) *AttemptFailure {
	if x == nil {
		return nil
	}
	return &AttemptFailure{
		ErrorType: ErrorType(x.ErrorType),
		Error:     x.Error,
	}
}
