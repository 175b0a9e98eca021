package fsm

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// apply runs one command; one function per command type, as in the files of
// this package by concern.
func (a *applier) apply(cmd *dexv1.Command) *Result {
	switch b := cmd.Body.(type) {
	case *dexv1.Command_CreateSession:
		return a.createSession(b.CreateSession)
	case *dexv1.Command_SendMessage:
		return a.sendMessage(b.SendMessage)
	case *dexv1.Command_RegisterWorker:
		return a.registerWorker(b.RegisterWorker)
	case *dexv1.Command_BumpEpoch:
		return a.bumpEpoch(b.BumpEpoch)
	case *dexv1.Command_StartAttempt:
		return a.startAttempt(b.StartAttempt)
	case *dexv1.Command_ClaimAttempt:
		return a.claimAttempt(b.ClaimAttempt)
	case *dexv1.Command_ReportAttempt:
		return a.reportAttempt(b.ReportAttempt)
	case *dexv1.Command_CompleteAttempt:
		return a.reportAttempt(completeAsReport(b.CompleteAttempt))
	case *dexv1.Command_FailAttempt:
		return a.reportAttempt(failAsReport(b.FailAttempt))
	case *dexv1.Command_ExpireAttempt:
		return a.expireAttempt(b.ExpireAttempt)
	case *dexv1.Command_ResolveApproval:
		return a.resolveApproval(b.ResolveApproval)
	case *dexv1.Command_AnswerQuestion:
		return a.answerQuestion(b.AnswerQuestion)
	case *dexv1.Command_FireTimer:
		return a.fireTimer(b.FireTimer)
	case *dexv1.Command_ResumeSession:
		return a.resumeSession(b.ResumeSession)
	case *dexv1.Command_RestartSessions:
		return a.restartSessions(b.RestartSessions)
	case *dexv1.Command_ResumeErrored:
		return a.resumeErrored(b.ResumeErrored)
	case *dexv1.Command_ReconcileOutcome:
		return a.reconcileOutcome(b.ReconcileOutcome)
	case *dexv1.Command_EditHistory:
		return a.editHistory(b.EditHistory)
	case *dexv1.Command_SetNode:
		return a.setNode(b.SetNode)
	case *dexv1.Command_RemoveNode:
		return a.removeNode(b.RemoveNode)
	case *dexv1.Command_SetEventRetention:
		return a.setEventRetention(b.SetEventRetention)
	case *dexv1.Command_PruneEvents:
		return a.pruneEvents(b.PruneEvents)
	case *dexv1.Command_DeregisterWorker:
		return a.deregisterWorker(b.DeregisterWorker)
	case *dexv1.Command_FailUnservedStep:
		return a.failUnservedStep(b.FailUnservedStep)
	case *dexv1.Command_DeleteSession:
		return a.deleteSession(b.DeleteSession)
	case *dexv1.Command_PurgeSession:
		return a.purgeSession(b.PurgeSession)
	case *dexv1.Command_ExpireSessions:
		return a.expireSessions(b.ExpireSessions)
	case *dexv1.Command_TimeoutAttempt:
		return a.timeoutAttempt(b.TimeoutAttempt)
	case *dexv1.Command_SetClusterId:
		return a.setClusterID(b.SetClusterId)
	case *dexv1.Command_CreateToken:
		return a.createToken(b.CreateToken)
	case *dexv1.Command_RevokeToken:
		return a.revokeToken(b.RevokeToken)
	case *dexv1.Command_CancelTurn:
		return a.cancelTurn(b.CancelTurn)
	}
	// Unreachable: ApplyEntry handles a nil body; every oneof case is above.
	return &Result{Err: reject(CodeInvalid, "unhandled command %T", cmd.Body)}
}

func rejected(r *Rejection) *Result { return &Result{Err: r} }

// checkEpoch fences commands proposed by a lease holder: one from an older
// epoch was proposed by a deposed leader and must change nothing.
func (a *applier) checkEpoch(epoch uint64) *Rejection {
	if cur := a.meta().Epoch; epoch != cur {
		return reject(CodeFailedPrecondition, "stale dispatch epoch %d: the current epoch is %d", epoch, cur)
	}
	return nil
}

func (a *applier) bumpEpoch(c *dexv1.BumpEpoch) *Result {
	if c.NodeId == "" {
		return rejected(reject(CodeInvalid, "node id is required"))
	}
	m := a.meta()
	m.Epoch++
	m.EpochHolder = c.NodeId
	return &Result{Epoch: m.Epoch}
}
