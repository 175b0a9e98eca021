package fsm

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A log written before ReportAttempt holds CompleteAttempt and FailAttempt;
// they apply as the ReportAttempt they mean, so an old log replays to the same
// state (and its repeated calls keep their names "complete" and "fail").

func completeAsReport(c *fsmpb.CompleteAttempt) *fsmpb.ReportAttempt {
	res := &dexv1.AttemptResult{}
	switch r := c.GetResult().(type) {
	case *fsmpb.CompleteAttempt_ModelOutput:
		res.Outcome = &dexv1.AttemptResult_ModelOutput{ModelOutput: r.ModelOutput}
	case *fsmpb.CompleteAttempt_ToolResult:
		res.Outcome = &dexv1.AttemptResult_ToolResult{ToolResult: r.ToolResult}
	case *fsmpb.CompleteAttempt_PollResult:
		res.Outcome = &dexv1.AttemptResult_PollResult{PollResult: r.PollResult}
	case *fsmpb.CompleteAttempt_Summary:
		res.Outcome = &dexv1.AttemptResult_Summary{Summary: r.Summary}
	}
	return &fsmpb.ReportAttempt{Ref: c.GetRef(), Result: res}
}

func failAsReport(c *fsmpb.FailAttempt) *fsmpb.ReportAttempt {
	return &fsmpb.ReportAttempt{Ref: c.GetRef(), Result: &dexv1.AttemptResult{
		Outcome: &dexv1.AttemptResult_Failure{Failure: &dexv1.AttemptFailure{ErrorType: c.GetErrorType(), Error: c.GetError()}},
	}}
}
