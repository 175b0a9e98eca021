package fsm

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A log written before ReportAttempt holds CompleteAttempt and FailAttempt;
// they apply as the ReportAttempt they mean, so an old log replays to the same
// state (and its repeated calls keep their names "complete" and "fail").

func completeAsReport(c *dexv1.CompleteAttempt) *dexv1.ReportAttempt {
	res := &dexv1.AttemptResult{}
	switch r := c.GetResult().(type) {
	case *dexv1.CompleteAttempt_ModelOutput:
		res.Outcome = &dexv1.AttemptResult_ModelOutput{ModelOutput: r.ModelOutput}
	case *dexv1.CompleteAttempt_ToolResult:
		res.Outcome = &dexv1.AttemptResult_ToolResult{ToolResult: r.ToolResult}
	case *dexv1.CompleteAttempt_PollResult:
		res.Outcome = &dexv1.AttemptResult_PollResult{PollResult: r.PollResult}
	case *dexv1.CompleteAttempt_Summary:
		res.Outcome = &dexv1.AttemptResult_Summary{Summary: r.Summary}
	}
	return &dexv1.ReportAttempt{Ref: c.GetRef(), Result: res}
}

func failAsReport(c *dexv1.FailAttempt) *dexv1.ReportAttempt {
	return &dexv1.ReportAttempt{Ref: c.GetRef(), Result: &dexv1.AttemptResult{
		Outcome: &dexv1.AttemptResult_Failure{Failure: &dexv1.AttemptFailure{ErrorType: c.GetErrorType(), Error: c.GetError()}},
	}}
}
