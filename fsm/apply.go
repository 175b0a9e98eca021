package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// apply runs one command; one function per command type, as in the files of
// this package by concern.
func (a *applier) apply(cmd *fsmpb.Command) *Result {
	switch b := cmd.Body.(type) {
	case *fsmpb.Command_CreateSession:
		return a.createSession(b.CreateSession)
	case *fsmpb.Command_SendMessage:
		return a.sendMessage(b.SendMessage)
	case *fsmpb.Command_RegisterWorker:
		return a.registerWorker(b.RegisterWorker)
	case *fsmpb.Command_BumpEpoch:
		return a.bumpEpoch(b.BumpEpoch)
	case *fsmpb.Command_StartAttempt:
		return a.startAttempt(b.StartAttempt)
	case *fsmpb.Command_ClaimAttempt:
		return a.claimAttempt(b.ClaimAttempt)
	case *fsmpb.Command_ReportAttempt:
		return a.reportAttempt(b.ReportAttempt)
	case *fsmpb.Command_CompleteAttempt:
		return a.reportAttempt(completeAsReport(b.CompleteAttempt))
	case *fsmpb.Command_FailAttempt:
		return a.reportAttempt(failAsReport(b.FailAttempt))
	case *fsmpb.Command_ExpireAttempt:
		return a.expireAttempt(b.ExpireAttempt)
	case *fsmpb.Command_ResolveApproval:
		return a.resolveApproval(b.ResolveApproval)
	case *fsmpb.Command_AnswerQuestion:
		return a.answerQuestion(b.AnswerQuestion)
	case *fsmpb.Command_FireTimer:
		return a.fireTimer(b.FireTimer)
	case *fsmpb.Command_ResumeSession:
		return a.resumeSession(b.ResumeSession)
	case *fsmpb.Command_RestartSessions:
		return a.restartSessions(b.RestartSessions)
	case *fsmpb.Command_ResumeErrored:
		return a.resumeErrored(b.ResumeErrored)
	case *fsmpb.Command_ReconcileOutcome:
		return a.reconcileOutcome(b.ReconcileOutcome)
	case *fsmpb.Command_EditHistory:
		return a.editHistory(b.EditHistory)
	case *fsmpb.Command_SetNode:
		return a.setNode(b.SetNode)
	case *fsmpb.Command_RemoveNode:
		return a.removeNode(b.RemoveNode)
	case *fsmpb.Command_SetEventRetention:
		return a.setEventRetention(b.SetEventRetention)
	case *fsmpb.Command_PruneEvents:
		return a.pruneEvents(b.PruneEvents)
	case *fsmpb.Command_DeregisterWorker:
		return a.deregisterWorker(b.DeregisterWorker)
	case *fsmpb.Command_FailUnservedStep:
		return a.failUnservedStep(b.FailUnservedStep)
	case *fsmpb.Command_DeleteSession:
		return a.deleteSession(b.DeleteSession)
	case *fsmpb.Command_PurgeSession:
		return a.purgeSession(b.PurgeSession)
	case *fsmpb.Command_ExpireSessions:
		return a.expireSessions(b.ExpireSessions)
	case *fsmpb.Command_TimeoutAttempt:
		return a.timeoutAttempt(b.TimeoutAttempt)
	case *fsmpb.Command_SetClusterId:
		return a.setClusterID(b.SetClusterId)
	case *fsmpb.Command_CreateToken:
		return a.createToken(b.CreateToken)
	case *fsmpb.Command_RevokeToken:
		return a.revokeToken(b.RevokeToken)
	case *fsmpb.Command_CancelTurn:
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

func (a *applier) bumpEpoch(c *fsmpb.BumpEpoch) *Result {
	if c.NodeId == "" {
		return rejected(reject(CodeInvalid, "node id is required"))
	}
	m := a.meta()
	m.Epoch++
	m.EpochHolder = c.NodeId
	return &Result{Epoch: m.Epoch}
}
