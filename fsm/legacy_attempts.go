package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A log written before ReportAttempt holds CompleteAttempt and FailAttempt;
// they apply as the ReportAttempt they mean, so an old log replays to the same
// state (and its repeated calls keep their names "complete" and "fail").

func (a *applier) completeAttempt(c *fsmpb.CompleteAttempt) *Result {
	return a.reportAttempt(completeAsReport(c))
}

func (a *applier) failAttempt(c *fsmpb.FailAttempt) *Result {
	return a.reportAttempt(failAsReport(c))
}

func completeAsReport(c *fsmpb.CompleteAttempt) *fsmpb.ReportAttempt {
	res := &fsmpb.AttemptResult{}
	switch r := c.GetResult().(type) {
	case *fsmpb.CompleteAttempt_ModelOutput:
		res.Outcome = &fsmpb.AttemptResult_ModelOutput{ModelOutput: r.ModelOutput}
	case *fsmpb.CompleteAttempt_ToolResult:
		res.Outcome = &fsmpb.AttemptResult_ToolResult{ToolResult: r.ToolResult}
	case *fsmpb.CompleteAttempt_PollResult:
		res.Outcome = &fsmpb.AttemptResult_PollResult{PollResult: r.PollResult}
	case *fsmpb.CompleteAttempt_Summary:
		res.Outcome = &fsmpb.AttemptResult_Summary{Summary: r.Summary}
	}
	return &fsmpb.ReportAttempt{Ref: c.GetRef(), Result: res}
}

func failAsReport(c *fsmpb.FailAttempt) *fsmpb.ReportAttempt {
	return &fsmpb.ReportAttempt{Ref: c.GetRef(), Result: &fsmpb.AttemptResult{
		Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{ErrorType: c.GetErrorType(), Error: c.GetError()}},
	}}
}
