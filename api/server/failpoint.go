package server

import "github.com/dexhq/dex/dispatch"

// Failpoint names of the chaos build (go build -tags chaos): the moments of
// the crash matrix (docs/crash-matrix.md) that a signal cannot hit reliably.
const (
	// FailpointBeforeCommitResult: in WorkerService ReportTask (which the
	// older CompleteTask and FailTask go through) after the request was
	// validated and before its proposal — the Worker sent its result, the
	// cluster has not committed it.
	FailpointBeforeCommitResult = "dexBeforeCommitResult"
	// FailpointAfterWaitResolved: in SessionService ResolveApproval and
	// AnswerQuestion after the proposal committed and before the answer,
	// and in the timer wheel after a FireTimer committed — the wait ended
	// while the turn moves on.
	FailpointAfterWaitResolved = dispatch.FailpointAfterWaitResolved
	// FailpointBeforeScheduleFire and FailpointAfterScheduleFire: in the
	// timer wheel before a FireScheduleSlot is proposed and after it
	// committed — a schedule's firing moment.
	FailpointBeforeScheduleFire = dispatch.FailpointBeforeScheduleFire
	FailpointAfterScheduleFire  = dispatch.FailpointAfterScheduleFire
)

// FailpointNames lists every failpoint of dexd.
var FailpointNames = []string{FailpointBeforeCommitResult, FailpointAfterWaitResolved, FailpointBeforeScheduleFire, FailpointAfterScheduleFire}
