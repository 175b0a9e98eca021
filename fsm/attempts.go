package fsm

import (
	"fmt"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Names of the logged Worker calls, kept with an attempt so a repeat of the
// last one is recognised and answered as the first time.
const (
	callClaim    = "claim"
	callComplete = "complete"
	callFail     = "fail"
)

// AttemptToken names one attempt of one Step; Workers quote it in every call.
func AttemptToken(stepID string, n uint32, epoch uint64) string {
	return fmt.Sprintf("%s#%d@%d", stepID, n, epoch)
}

func (a *applier) startAttempt(c *fsmpb.StartAttempt) *Result {
	if r := validID("worker id", c.WorkerId); r != nil {
		return rejected(r)
	}
	st, r := a.step(c.StepId)
	if r != nil {
		return rejected(r)
	}
	if st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		return rejected(reject(CodeFailedPrecondition, "step %s is not queued (status %s)", st.Id, st.Status))
	}
	if want := uint32(len(st.Attempts)) + 1; c.Attempt != want {
		return rejected(reject(CodeFailedPrecondition, "step %s: next attempt is %d, not %d", st.Id, want, c.Attempt))
	}
	if a.now < st.ReadyAtMs {
		return rejected(reject(CodeFailedPrecondition, "step %s is not ready before %d", st.Id, st.ReadyAtMs))
	}
	if r := a.checkWorkerServes(st, c.WorkerId); r != nil {
		return rejected(r)
	}
	at := &fsmpb.Attempt{
		N:           c.Attempt,
		WorkerId:    c.WorkerId,
		Epoch:       c.Epoch,
		Token:       AttemptToken(st.Id, c.Attempt, c.Epoch),
		Status:      fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING,
		StartedAtMs: a.now,
	}
	if d := a.runTimeout(st, c); d > 0 {
		at.DeadlineMs = a.now + d
	}
	st.Attempts = append(st.Attempts, at)
	st.Status = fsmpb.StepStatus_STEP_STATUS_RUNNING
	a.putStep(st)
	a.emit(st.SessionId, "attempt_started", st.Id, fmt.Sprintf("attempt %d on %s", at.N, at.WorkerId))
	return &Result{SessionID: st.SessionId, StepID: st.Id, Attempt: at.CloneVT()}
}

// workerCall checks a Worker's reference to its attempt. It returns replay when
// the call repeats the last one committed: the caller answers as before and
// changes nothing.
func (a *applier) workerCall(ref *fsmpb.AttemptRef, call string) (st *fsmpb.Step, at *fsmpb.Attempt, replay *Result, rej *Rejection) {
	if ref == nil {
		return nil, nil, nil, reject(CodeInvalid, "attempt reference is required")
	}
	st, rej = a.step(ref.StepId)
	if rej != nil {
		return nil, nil, nil, rej
	}
	if ref.Attempt == 0 || int(ref.Attempt) > len(st.Attempts) {
		return nil, nil, nil, reject(CodeNotFound, "step %s has no attempt %d", st.Id, ref.Attempt)
	}
	at = st.Attempts[ref.Attempt-1]
	if ref.Token != at.Token {
		return nil, nil, nil, reject(CodeFailedPrecondition, "attempt token does not match attempt %d of step %s", ref.Attempt, st.Id)
	}
	if ref.Seq == at.LastSeq && ref.Seq > 0 {
		if at.LastCall != call {
			return nil, nil, nil, reject(CodeFailedPrecondition, "call %d of attempt %s was a %s, not a %s", ref.Seq, at.Token, at.LastCall, call)
		}
		return st, at, &Result{SessionID: st.SessionId, StepID: st.Id, Attempt: at.CloneVT(), Replayed: true}, nil
	}
	if int(ref.Attempt) != len(st.Attempts) {
		return nil, nil, nil, reject(CodeFailedPrecondition, "attempt %d of step %s was replaced by attempt %d", ref.Attempt, st.Id, len(st.Attempts))
	}
	if ref.Seq <= at.LastSeq {
		return nil, nil, nil, reject(CodeFailedPrecondition, "call %d of attempt %s is older than its last call %d", ref.Seq, at.Token, at.LastSeq)
	}
	if ref.Seq > at.LastSeq+1 {
		return nil, nil, nil, reject(CodeFailedPrecondition, "call %d of attempt %s is ahead of its last call %d", ref.Seq, at.Token, at.LastSeq)
	}
	if at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
		return nil, nil, nil, reject(CodeFailedPrecondition, "attempt %s is no longer running (%s): it was cancelled", at.Token, at.Status)
	}
	at.LastSeq = ref.Seq
	at.LastCall = call
	return st, at, nil, nil
}

func (a *applier) claimAttempt(c *fsmpb.ClaimAttempt) *Result {
	st, at, replay, r := a.workerCall(c.Ref, callClaim)
	if r != nil {
		return rejected(r)
	}
	if replay != nil {
		return replay
	}
	if at.ClaimedAtMs != 0 {
		return rejected(reject(CodeFailedPrecondition, "attempt %s is already claimed", at.Token))
	}
	at.ClaimedAtMs = a.now
	a.touched.attemptClaimed(st.Id, at.N)
	a.putStep(st)
	if st.CallId != "" {
		s, r := a.session(st.SessionId)
		if r != nil {
			return rejected(r)
		}
		a.markCallRan(s, st.CallId)
		a.putSession(s)
	}
	a.emit(st.SessionId, "attempt_claimed", st.Id, at.Token)
	return &Result{SessionID: st.SessionId, StepID: st.Id, Attempt: at.CloneVT()}
}

// reportAttempt ends an attempt as its Worker reports: a success completes
// the Step, a failure goes to the Step's retry policy. The logged call is named
// by the kind of report, so a complete and a fail at one seq stay apart.
func (a *applier) reportAttempt(c *fsmpb.ReportAttempt) *Result {
	call := callComplete
	if _, failed := c.GetResult().GetOutcome().(*fsmpb.AttemptResult_Failure); failed {
		call = callFail
	}
	st, at, replay, r := a.workerCall(c.Ref, call)
	if r != nil {
		return rejected(r)
	}
	if replay != nil {
		return replay
	}
	if call == callFail {
		f := c.Result.GetFailure()
		at.Status = fsmpb.AttemptStatus_ATTEMPT_STATUS_FAILED
		at.ErrorType = f.GetErrorType()
		at.Error = f.GetError()
		res := a.attemptEnded(st, at)
		if res.Err == nil {
			if s := a.tx.Session(st.SessionId); s != nil {
				a.honorRetryAfter(s, st, f)
			}
		}
		return res
	}
	res := c.GetResult()
	if r := resultFits(st, res); r != nil {
		return rejected(r)
	}
	s, r := a.session(st.SessionId)
	if r != nil {
		return rejected(r)
	}
	at.Status = fsmpb.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED
	at.EndedAtMs = a.now
	a.touched.attemptEnded(st.Id, at.N)
	a.attemptTraced(st, at)
	if st.CallId != "" && writes(st) {
		a.markCallRan(s, st.CallId) // a write that completed has run, claimed or not
	}
	if r := a.stepSucceeded(s, st, res); r != nil {
		return rejected(r)
	}
	a.putSession(s)
	return &Result{SessionID: st.SessionId, StepID: st.Id, Attempt: at.CloneVT()}
}

func writes(st *fsmpb.Step) bool {
	return st.Kind == fsmpb.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL ||
		(st.Kind == fsmpb.StepKind_STEP_KIND_CALL_TOOL && st.Policy.GetAccess() != fsmpb.ToolAccess_TOOL_ACCESS_READ)
}

// resultFits checks that the result is of the kind the Step produces.
func resultFits(st *fsmpb.Step, c *fsmpb.AttemptResult) *Rejection {
	k := Kind(st.Kind)
	if k.Result == nil || !k.Result(c) {
		return reject(CodeInvalid, "a %s step cannot complete with a %T result", k.Name, c.GetOutcome())
	}
	switch k.Handler {
	case HandlerModel:
		return CheckModelOutput(c.GetModelOutput().GetToolCalls())
	case HandlerCompact:
		if c.GetSummary() == "" {
			return reject(CodeInvalid, "the summary of step %s is empty", st.Id)
		}
	}
	return nil
}

// CheckModelOutput is the rule every model output meets before it is
// logged: each tool call names a tool and a call id, unique within the
// output (results, idempotency keys and Steps are keyed by it). The API and
// the Worker library check it too (wirerules.CheckModelOutput), so a bad
// output is refused at once. It takes the output's tool calls, as the log or
// the Worker protocol carries them.
func CheckModelOutput[C wirerules.NamedCall](calls []C) *Rejection {
	return invalid(wirerules.CheckModelOutput(calls))
}

// runningAttempt checks a leader's command that ends an attempt (the table
// fences its epoch): the attempt is the Step's current one and it still runs.
func (a *applier) runningAttempt(stepID string, n uint32) (*fsmpb.Step, *fsmpb.Attempt, *Rejection) {
	st, r := a.step(stepID)
	if r != nil {
		return nil, nil, r
	}
	if n == 0 || int(n) != len(st.Attempts) {
		return nil, nil, reject(CodeFailedPrecondition, "attempt %d is not the current attempt of step %s", n, st.Id)
	}
	at := st.Attempts[n-1]
	if at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
		return nil, nil, reject(CodeFailedPrecondition, "attempt %s already ended (%s)", at.Token, at.Status)
	}
	return st, at, nil
}

func (a *applier) expireAttempt(c *fsmpb.ExpireAttempt) *Result {
	st, at, r := a.runningAttempt(c.StepId, c.Attempt)
	if r != nil {
		return rejected(r)
	}
	at.Status = fsmpb.AttemptStatus_ATTEMPT_STATUS_EXPIRED
	at.Error = "the Worker stopped heartbeating"
	return a.attemptEnded(st, at)
}

// attemptEnded records a failed or expired attempt's progress and applies the
// Step's retry policy.
func (a *applier) attemptEnded(st *fsmpb.Step, at *fsmpb.Attempt) *Result {
	s, r := a.session(st.SessionId)
	if r != nil {
		return rejected(r)
	}
	at.EndedAtMs = a.now
	a.touched.attemptEnded(st.Id, at.N)
	at.Progress = a.progress(s, st)
	a.attemptTraced(st, at)
	a.emit(st.SessionId, "attempt_failed", st.Id, fmt.Sprintf("attempt %d: %s %s", at.N, at.Progress, at.Error))
	Kind(st.Kind).failed(a, s, st, at)
	a.putSession(s)
	return &Result{SessionID: st.SessionId, StepID: st.Id, Attempt: at.CloneVT()}
}

// progress is exact: NOT_STARTED only when no attempt of the Step was ever
// claimed and the call never ran before (it did not ask the user anything).
func (a *applier) progress(s *fsmpb.Session, st *fsmpb.Step) fsmpb.AttemptProgress {
	for _, at := range st.Attempts {
		if at.ClaimedAtMs != 0 {
			return fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_COMPLETED
		}
	}
	if c := findCall(s, st.CallId); c != nil && c.Ran && st.Kind != fsmpb.StepKind_STEP_KIND_POLL_TOOL_TASK {
		return fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_COMPLETED
	}
	return fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_STARTED
}

// withinWindow: a model Step may start another attempt only inside the window
// opened by its first attempt.
func (a *applier) withinWindow(st *fsmpb.Step) bool {
	if len(st.Attempts) == 0 {
		return true
	}
	return a.now-st.Attempts[0].StartedAtMs < ModelAttemptWindow.Milliseconds()
}

// requeue puts a Step back in the queue for its next attempt after a backoff.
func (a *applier) requeue(st *fsmpb.Step) {
	st.Status = fsmpb.StepStatus_STEP_STATUS_QUEUED
	st.ReadyAtMs = a.now + retryBackoff(len(st.Attempts))
	m := a.meta()
	m.NextQueueSeq++
	st.QueueSeq = m.NextQueueSeq
	a.putStep(st)
	a.emit(st.SessionId, "step_requeued", st.Id, fmt.Sprintf("attempt %d after %d ms", len(st.Attempts)+1, st.ReadyAtMs-a.now))
}

// finish ends a Step with its outcome.
func (a *applier) finish(st *fsmpb.Step, o fsmpb.Outcome, result string, isError bool) {
	st.Status = fsmpb.StepStatus_STEP_STATUS_DONE
	st.Outcome = o
	st.Result = result
	st.IsError = isError
	st.EndedAtMs = a.now
	a.touched.stepFinished(st.Id)
	a.stepTraced(st)
	a.putStep(st)
	a.emit(st.SessionId, "step_"+OutcomeName(o), st.Id, "")
}

// OutcomeName is the documented name of an outcome (docs/attempts.md),
// the same the API's clients print.
func OutcomeName(o fsmpb.Outcome) string { return wirerules.OutcomeName(dexv1.Outcome(o)) }
