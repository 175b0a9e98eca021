package fsm

import (
	"fmt"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// waitingStep finds a Step of the given kind that still waits; a wait that
// already ended is refused, so it stays recorded once.
func (a *applier) waitingStep(id string, kind dexv1.StepKind) (*dexv1.Session, *dexv1.Step, *dexv1.CallState, *Rejection) {
	st, r := a.step(id)
	if r != nil {
		return nil, nil, nil, r
	}
	if st.Kind != kind {
		return nil, nil, nil, reject(CodeFailedPrecondition, "step %s is a %s, not a %s", st.Id, KindName(st.Kind), KindName(kind))
	}
	if st.Status != dexv1.StepStatus_STEP_STATUS_WAITING {
		return nil, nil, nil, reject(CodeFailedPrecondition, "step %s no longer waits: it was resolved already", st.Id)
	}
	s, r := a.session(st.SessionId)
	if r != nil {
		return nil, nil, nil, r
	}
	c := findCall(s, st.CallId)
	if c == nil {
		return nil, nil, nil, reject(CodeFailedPrecondition, "step %s belongs to no call of the turn in progress", st.Id)
	}
	return s, st, c, nil
}

func (a *applier) resolveApproval(c *dexv1.ResolveApproval) *Result {
	s, st, call, r := a.waitingStep(c.StepId, dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL)
	if r != nil {
		return rejected(r)
	}
	if c.Approved {
		a.finish(st, dexv1.Outcome_OUTCOME_SUCCEEDED, "approved", false)
		a.queueToolStep(s, call)
	} else {
		why := "denied by the user"
		if c.Reason != "" {
			why += ": " + c.Reason
		}
		a.finish(st, dexv1.Outcome_OUTCOME_SUCCEEDED, "denied", false)
		a.resolveCall(s, call, dexv1.Outcome_OUTCOME_FAILED, why)
	}
	a.afterCallChange(s)
	a.putSession(s)
	return &Result{SessionID: s.Id, StepID: st.Id}
}

func (a *applier) answerQuestion(c *dexv1.AnswerQuestion) *Result {
	if c.Answer == "" {
		return rejected(reject(CodeInvalid, "the answer is empty"))
	}
	s, st, call, r := a.waitingStep(c.StepId, dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER)
	if r != nil {
		return rejected(r)
	}
	a.finish(st, dexv1.Outcome_OUTCOME_SUCCEEDED, c.Answer, false)
	a.resolveCall(s, call, dexv1.Outcome_OUTCOME_SUCCEEDED, c.Answer)
	a.afterCallChange(s)
	a.putSession(s)
	return &Result{SessionID: s.Id, StepID: st.Id}
}

func (a *applier) fireTimer(c *dexv1.FireTimer) *Result {
	if r := a.checkEpoch(c.Epoch); r != nil {
		return rejected(r)
	}
	s, st, call, r := a.waitingStep(c.StepId, dexv1.StepKind_STEP_KIND_AWAIT_TIMER)
	if r != nil {
		return rejected(r)
	}
	if a.now < st.DueAtMs {
		return rejected(reject(CodeFailedPrecondition, "timer %s is due at %d, not yet", st.Id, st.DueAtMs))
	}
	text := fmt.Sprintf("slept until %d (fired at %d)", st.DueAtMs, a.now)
	a.finish(st, dexv1.Outcome_OUTCOME_SUCCEEDED, text, false)
	a.resolveCall(s, call, dexv1.Outcome_OUTCOME_SUCCEEDED, text)
	a.afterCallChange(s)
	a.putSession(s)
	return &Result{SessionID: s.Id, StepID: st.Id}
}
