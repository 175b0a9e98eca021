package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// commandTable registers every command body once: its apply function,
// whether it is fenced by the dispatch epoch (fenced) and whether it may
// queue Steps (queues). A body missing here fails
// TestCommandTable_RegistersEveryBodyOnce.
var commandTable = []command{
	unfenced((*fsmpb.Command).GetCreateSession, (*applier).createSession).queues(),
	unfenced((*fsmpb.Command).GetSendMessage, (*applier).sendMessage).queues(),
	unfenced((*fsmpb.Command).GetRegisterWorker, (*applier).registerWorker),
	unfenced((*fsmpb.Command).GetBumpEpoch, (*applier).bumpEpoch),
	fenced((*fsmpb.Command).GetStartAttempt, nil, (*applier).startAttempt),
	unfenced((*fsmpb.Command).GetClaimAttempt, (*applier).claimAttempt),
	// CompleteAttempt and FailAttempt are only in logs written before
	// ReportAttempt; they apply as it does.
	unfenced((*fsmpb.Command).GetCompleteAttempt, (*applier).completeAttempt).queues(),
	unfenced((*fsmpb.Command).GetFailAttempt, (*applier).failAttempt).queues(),
	fenced((*fsmpb.Command).GetExpireAttempt, nil, (*applier).expireAttempt).queues(),
	unfenced((*fsmpb.Command).GetResolveApproval, (*applier).resolveApproval).queues(),
	unfenced((*fsmpb.Command).GetAnswerQuestion, (*applier).answerQuestion).queues(),
	fenced((*fsmpb.Command).GetFireTimer, nil, (*applier).fireTimer).queues(),
	unfenced((*fsmpb.Command).GetResumeSession, (*applier).resumeSession).queues(),
	// A restart retries the errored sessions' kept turns.
	fenced((*fsmpb.Command).GetRestartSessions, nil, (*applier).restartSessions).queues(),
	fenced((*fsmpb.Command).GetResumeErrored, nil, (*applier).resumeErrored).queues(),
	unfenced((*fsmpb.Command).GetReconcileOutcome, (*applier).reconcileOutcome).queues(),
	unfenced((*fsmpb.Command).GetEditHistory, (*applier).editHistory),
	unfenced((*fsmpb.Command).GetSetNode, (*applier).setNode),
	unfenced((*fsmpb.Command).GetRemoveNode, (*applier).removeNode),
	fenced((*fsmpb.Command).GetSetEventRetention, checkEventRetention, (*applier).setEventRetention),
	fenced((*fsmpb.Command).GetPruneEvents, checkPruneEvents, (*applier).pruneEvents),
	fenced((*fsmpb.Command).GetDeregisterWorker, nil, (*applier).deregisterWorker),
	fenced((*fsmpb.Command).GetFailUnservedStep, nil, (*applier).failUnservedStep).queues(),
	// Deleting (or expiring) a child tells its parent, which may start a turn.
	unfenced((*fsmpb.Command).GetDeleteSession, (*applier).deleteSession).queues(),
	fenced((*fsmpb.Command).GetPurgeSession, checkPurgeSession, (*applier).purgeSession),
	fenced((*fsmpb.Command).GetExpireSessions, checkExpireSessions, (*applier).expireSessions).queues(),
	fenced((*fsmpb.Command).GetTimeoutAttempt, nil, (*applier).timeoutAttempt).queues(),
	unfenced((*fsmpb.Command).GetReportAttempt, (*applier).reportAttempt).queues(),
	unfenced((*fsmpb.Command).GetSetClusterId, (*applier).setClusterID),
	unfenced((*fsmpb.Command).GetCreateToken, (*applier).createToken),
	unfenced((*fsmpb.Command).GetRevokeToken, (*applier).revokeToken),
	unfenced((*fsmpb.Command).GetCancelTurn, (*applier).cancelTurn).queues(),
	unfenced((*fsmpb.Command).GetCloseSession, (*applier).closeSession),
	// Deleting a closed child tells its parent, which may start a turn.
	fenced((*fsmpb.Command).GetExpireClosedSessions, checkExpireClosedSessions, (*applier).expireClosedSessions).queues(),
	// An import writes a session at rest: it queues nothing.
	fenced((*fsmpb.Command).GetImportSessionBegin, checkImportBegin, (*applier).importSessionBegin),
	fenced((*fsmpb.Command).GetImportSessionPage, checkImportPage, (*applier).importSessionPage),
	fenced((*fsmpb.Command).GetImportSessionEnd, checkImportEnd, (*applier).importSessionEnd),
	fenced((*fsmpb.Command).GetSetTurnFolding, nil, (*applier).setTurnFolding),
	fenced((*fsmpb.Command).GetFoldTurns, checkFoldTurns, (*applier).foldTurns),
	// A new budget applies from the next model call; a paused session
	// waits for its resume.
	unfenced((*fsmpb.Command).GetSetBudget, (*applier).setBudget),
	// Labels change what ListSessions finds, never what runs.
	unfenced((*fsmpb.Command).GetSetLabels, (*applier).setLabels),
	// A fork's Begin writes a placeholder, its pages are ImportSessionPage
	// commands; its End may start the fork's first turn.
	fenced((*fsmpb.Command).GetForkSessionBegin, checkForkBegin, (*applier).forkSessionBegin),
	fenced((*fsmpb.Command).GetForkSessionEnd, checkForkEnd, (*applier).forkSessionEnd).queues(),
	// Bulk jobs (bulk.go): a step acts on its sessions as their own
	// commands would, so it may start or move turns on.
	unfenced((*fsmpb.Command).GetStartBulkJob, (*applier).startBulkJob),
	fenced((*fsmpb.Command).GetBulkJobStep, checkBulkJobStep, (*applier).bulkJobStep).queues(),
	unfenced((*fsmpb.Command).GetCancelBulkJob, (*applier).cancelBulkJob),
	// Schedules (docs/schedules.md): an operator's commands, and the
	// leader's decision of a slot, which may start a session.
	unfenced((*fsmpb.Command).GetPutSchedule, (*applier).putSchedule),
	unfenced((*fsmpb.Command).GetSetSchedulePaused, (*applier).setSchedulePaused),
	unfenced((*fsmpb.Command).GetDeleteSchedule, (*applier).deleteSchedule),
	fenced((*fsmpb.Command).GetFireScheduleSlot, checkFireSlot, (*applier).fireScheduleSlot).queues(),
	unfenced((*fsmpb.Command).GetBatch, (*applier).nestedBatch),
}
