package fsm

import (
	"fmt"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// waitingStep finds a Step of the given kind that still waits; a wait that
// already ended is refused, so it stays recorded once.
func (a *applier) waitingStep(id string, kind fsmpb.StepKind) (*fsmpb.Session, *fsmpb.Step, *fsmpb.CallState, *Rejection) {
	st, r := a.step(id)
	if r != nil {
		return nil, nil, nil, r
	}
	if st.Kind != kind {
		return nil, nil, nil, reject(CodeFailedPrecondition, "step %s is a %s, not a %s", st.Id, KindName(st.Kind), KindName(kind))
	}
	if st.Status != fsmpb.StepStatus_STEP_STATUS_WAITING {
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

func (a *applier) resolveApproval(c *fsmpb.ResolveApproval) *Result {
	s, st, call, r := a.waitingStep(c.StepId, fsmpb.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL)
	if r != nil {
		return rejected(r)
	}
	if c.Approved {
		a.finish(st, fsmpb.Outcome_OUTCOME_SUCCEEDED, "approved", false)
		a.queueToolStep(s, call)
	} else {
		why := "denied by the user"
		if c.Reason != "" {
			why += ": " + c.Reason
		}
		a.finish(st, fsmpb.Outcome_OUTCOME_SUCCEEDED, "denied", false)
		a.resolveCall(s, call, fsmpb.Outcome_OUTCOME_FAILED, why)
	}
	a.afterCallChange(s)
	a.putSession(s)
	return &Result{SessionID: s.Id, StepID: st.Id}
}

func (a *applier) answerQuestion(c *fsmpb.AnswerQuestion) *Result {
	if c.Answer == "" {
		return rejected(reject(CodeInvalid, "the answer is empty"))
	}
	s, st, call, r := a.waitingStep(c.StepId, fsmpb.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER)
	if r != nil {
		return rejected(r)
	}
	a.finish(st, fsmpb.Outcome_OUTCOME_SUCCEEDED, c.Answer, false)
	a.resolveCall(s, call, fsmpb.Outcome_OUTCOME_SUCCEEDED, c.Answer)
	a.afterCallChange(s)
	a.putSession(s)
	return &Result{SessionID: s.Id, StepID: st.Id}
}

func (a *applier) fireTimer(c *fsmpb.FireTimer) *Result {
	s, st, call, r := a.waitingStep(c.StepId, fsmpb.StepKind_STEP_KIND_AWAIT_TIMER)
	if r != nil {
		return rejected(r)
	}
	if a.now < st.DueAtMs {
		return rejected(reject(CodeFailedPrecondition, "timer %s is due at %s, not yet", st.Id, msTime(st.DueAtMs)))
	}
	text := fmt.Sprintf("slept until %s (fired at %s)", msTime(st.DueAtMs), msTime(a.now))
	a.finish(st, fsmpb.Outcome_OUTCOME_SUCCEEDED, text, false)
	a.resolveCall(s, call, fsmpb.Outcome_OUTCOME_SUCCEEDED, text)
	a.afterCallChange(s)
	a.putSession(s)
	return &Result{SessionID: s.Id, StepID: st.Id}
}

// msTime formats a command time for people and models: RFC 3339 in UTC.
// Deterministic: it formats the time it is given and reads no clock or zone.
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
