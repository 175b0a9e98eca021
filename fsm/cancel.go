package fsm

import (
	"fmt"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// maxCancelReason bounds the reason a CancelTurn carries into the history.
const maxCancelReason = 1000

// defaultCanceller names who cancelled when the command does not say.
const defaultCanceller = "an operator"

// cancelTurn stops a session's turn: every unfinished Step of it ends (queued
// ones are dropped, a running attempt is cancelled and its Worker hears so on
// its next heartbeat, a wait ends), every unfinished tool call gets a result
// saying what is known of it, a note tells the next turn's model, and the
// session becomes idle with its inbox kept. The live Steps are the turn's
// model or compaction Step and each open call's current Step, so the command
// touches a bounded number of rows.
func (a *applier) cancelTurn(c *fsmpb.CancelTurn) *Result {
	if r := validID("session id", c.SessionId); r != nil {
		return rejected(r)
	}
	by := c.By
	if by == "" {
		by = defaultCanceller
	}
	if len(by) > maxIDLength {
		return rejected(reject(CodeInvalid, "by is longer than %d bytes", maxIDLength))
	}
	if len(c.Reason) > maxCancelReason {
		return rejected(reject(CodeInvalid, "reason is longer than %d bytes", maxCancelReason))
	}
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	if isClosed(s) {
		return rejected(reject(CodeFailedPrecondition, "session %s is closed: it has no turn to cancel", s.Id))
	}
	if s.Turn == nil {
		return rejected(reject(CodeFailedPrecondition, "session %s is %s with no turn in progress: nothing to cancel", s.Id, StatusName(s.Status)))
	}
	why := "the turn was cancelled by " + by
	if c.Reason != "" {
		why += ": " + c.Reason
	}
	res := &Result{SessionID: s.Id}
	if id := s.Turn.StepId; id != "" {
		if st, r := a.step(id); r == nil && st.Status != fsmpb.StepStatus_STEP_STATUS_DONE {
			a.cancelStep(s, st, why, res)
		}
	}
	for _, call := range s.Turn.Calls {
		if call.Phase == fsmpb.CallPhase_CALL_PHASE_DONE {
			continue
		}
		o, text := fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("%s: %s before the call ended", NotRunPrefix, why)
		if st, r := a.step(call.StepId); r == nil && st.Status != fsmpb.StepStatus_STEP_STATUS_DONE {
			o, text = a.cancelledCall(s, call, st, why)
			a.cancelStep(s, st, why, res)
		}
		a.resolveCall(s, call, o, text)
	}
	note := fmt.Sprintf("The previous turn was cancelled by %s.", by)
	if c.Reason != "" {
		note = fmt.Sprintf("The previous turn was cancelled by %s: %s", by, c.Reason)
	}
	a.appendHistory(s, &fsmpb.HistoryEntry{Kind: fsmpb.HistoryKind_HISTORY_KIND_NOTE, Text: note})
	t := s.Turn
	s.Turn = nil
	a.turnEnded(s, t, "cancelled")
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_IDLE
	s.ResumeAtMs = 0
	s.RejectedTurns = 0
	s.ErrorEpisode, s.EpisodeResumes = false, 0
	s.PauseReason, s.PauseMessage = fsmpb.PauseReason_PAUSE_REASON_UNSPECIFIED, ""
	a.emit(s.Id, "turn_cancelled", "", fmt.Sprintf("turn %d: %s", t.Number, why))
	a.putSession(s)
	return res
}

// cancelStep ends one unfinished Step of a cancelled turn as failed; its
// running attempt, if any, becomes cancelled.
func (a *applier) cancelStep(s *fsmpb.Session, st *fsmpb.Step, why string, res *Result) {
	res.StepsCancelled++
	if n := len(st.Attempts); st.Status == fsmpb.StepStatus_STEP_STATUS_RUNNING && n > 0 {
		at := st.Attempts[n-1]
		if at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
			at.Status = fsmpb.AttemptStatus_ATTEMPT_STATUS_CANCELLED
			at.Error = why
			at.EndedAtMs = a.now
			a.touched.attemptEnded(st.Id, at.N) // its live output ends, abandoned
			at.Progress = a.progress(s, st)
			res.AttemptsCancelled++
			a.attemptTraced(st, at)
			a.emit(s.Id, "attempt_cancelled", st.Id, fmt.Sprintf("attempt %d on %s", at.N, at.WorkerId))
		}
	}
	a.finish(st, fsmpb.Outcome_OUTCOME_FAILED, "cancelled: "+why, true)
}

// cancelledCall is what a cancelled call records, by what may have happened:
// a call that may have run (a claimed attempt, a write that completed, a
// long-running task that started) is outcome_unknown, except a read, which
// failed; one that never ran failed with the not-run prefix, so it is safe to
// call again.
func (a *applier) cancelledCall(s *fsmpb.Session, call *fsmpb.CallState, st *fsmpb.Step, why string) (fsmpb.Outcome, string) {
	switch {
	case call.TaskId != "":
		return fsmpb.Outcome_OUTCOME_UNKNOWN, fmt.Sprintf("%s while task %s was running: the task may still run and its result is unknown", why, call.TaskId)
	case st.Kind == fsmpb.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL:
		return fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("%s: %s while the call awaited approval", NotRunPrefix, why)
	case st.Kind == fsmpb.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER:
		return fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("%s while the question waited for an answer", why)
	case st.Kind == fsmpb.StepKind_STEP_KIND_AWAIT_TIMER:
		return fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("%s before the sleep ended", why)
	}
	if a.progress(s, st) == fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_STARTED {
		return fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("%s: %s before the tool started", NotRunPrefix, why)
	}
	if st.Policy.GetAccess() == fsmpb.ToolAccess_TOOL_ACCESS_READ {
		return fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("%s while the tool ran", why)
	}
	return fsmpb.Outcome_OUTCOME_UNKNOWN, fmt.Sprintf("%s while the tool ran: it may have run, and it is not run again", why)
}
