package fsm

import (
	"fmt"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// retryKeptTurn runs the RunModel of a kept turn once more.
func (a *applier) retryKeptTurn(s *fsmpb.Session) {
	s.ResumeAtMs = 0
	s.PauseReason = fsmpb.PauseReason_PAUSE_REASON_UNSPECIFIED
	s.PauseMessage = ""
	a.queueModel(s)
}

// resumeSession is the operator's resume: a paused or errored session retries
// its kept turn once, or drops it (RESUME_CHOICE_DROP); one without a kept
// turn goes idle and answers its inbox.
func (a *applier) resumeSession(c *fsmpb.ResumeSession) *Result {
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	if r := a.resume(s, c.Choice); r != nil {
		return rejected(r)
	}
	a.putSession(s)
	return &Result{SessionID: s.Id}
}

// resume applies a resume choice to a paused or errored session; the caller
// puts the session.
func (a *applier) resume(s *fsmpb.Session, choice fsmpb.ResumeChoice) *Rejection {
	switch s.Status {
	case fsmpb.SessionStatus_SESSION_STATUS_PAUSED, fsmpb.SessionStatus_SESSION_STATUS_ERRORED:
	default:
		return reject(CodeFailedPrecondition, "session %s is %s: only a paused or errored session can be resumed", s.Id, StatusName(s.Status))
	}
	switch choice {
	case fsmpb.ResumeChoice_RESUME_CHOICE_UNSPECIFIED, fsmpb.ResumeChoice_RESUME_CHOICE_RETRY, fsmpb.ResumeChoice_RESUME_CHOICE_DROP:
	default:
		return reject(CodeInvalid, "unknown resume choice %d: retry or drop", choice)
	}
	if s.PauseReason == fsmpb.PauseReason_PAUSE_REASON_LOOP {
		allowRepeats(s)
	}
	a.emit(s.Id, "session_resumed", "", ResumeChoiceName(choice))
	switch {
	case s.Turn != nil && choice == fsmpb.ResumeChoice_RESUME_CHOICE_DROP:
		a.dropKeptTurn(s)
	case s.Turn != nil:
		a.retryKeptTurn(s)
	default:
		s.Status = fsmpb.SessionStatus_SESSION_STATUS_IDLE
		s.PauseReason, s.PauseMessage = fsmpb.PauseReason_PAUSE_REASON_UNSPECIFIED, ""
		s.ResumeAtMs = 0
		if s.InboxCount > 0 {
			a.startTurn(s)
		}
	}
	return nil
}

// ResumeChoiceName is "retry" or "drop".
func ResumeChoiceName(c fsmpb.ResumeChoice) string {
	if c == fsmpb.ResumeChoice_RESUME_CHOICE_DROP {
		return "drop"
	}
	return "retry"
}

// restartSessions is the new leader's recovery: every errored session whose
// input survived is retried once, at once and with a fresh error-resume
// backoff. The rejected-turn count is kept; paused sessions are left alone.
// Imports begun under an earlier leader are discarded: their client sends
// them again.
func (a *applier) restartSessions(c *fsmpb.RestartSessions) *Result {
	a.discardImports(c.Epoch)
	var ids []string
	eachSessionIn(a.tx, fsmpb.SessionStatus_SESSION_STATUS_ERRORED, func(s *fsmpb.Session) bool {
		if s.Turn != nil {
			ids = append(ids, s.Id)
		}
		return true
	})
	// Collected first: the loops write the table they read. Every session
	// is restarted before any is retried, and a restart opens a new error
	// episode: a retryable failure after it tells the parent again.
	nextStep := make([]uint64, len(ids))
	for i, id := range ids {
		s, _ := a.session(id)
		s.ErrorEpisode = false
		s.EpisodeResumes = 0
		a.emit(s.Id, "session_restarted", "", fmt.Sprintf("epoch %d", c.Epoch))
		a.putSession(s)
		nextStep[i] = s.NextStep
	}
	for i, id := range ids {
		s, _ := a.session(id)
		// A child whose retry fails at once tells its parent, and that
		// message retries the parent's kept turn: a session that queued a
		// Step since it was restarted has had its one retry.
		if s.NextStep != nextStep[i] {
			continue
		}
		a.retryKeptTurn(s)
		a.putSession(s)
	}
	return &Result{}
}

// resumeErrored is the error-resume backoff coming due.
func (a *applier) resumeErrored(c *fsmpb.ResumeErrored) *Result {
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	if s.Status != fsmpb.SessionStatus_SESSION_STATUS_ERRORED || s.Turn == nil || s.ResumeAtMs == 0 {
		return rejected(reject(CodeFailedPrecondition, "session %s has no resume scheduled", s.Id))
	}
	if a.now < s.ResumeAtMs {
		return rejected(reject(CodeFailedPrecondition, "session %s resumes at %d, not yet", s.Id, s.ResumeAtMs))
	}
	s.EpisodeResumes++
	a.emit(s.Id, "session_resumed", "", fmt.Sprintf("error-resume %d", s.EpisodeResumes))
	a.retryKeptTurn(s)
	a.putSession(s)
	return &Result{SessionID: s.Id}
}

// reconcileOutcome records what really happened to an outcome_unknown call.
func (a *applier) reconcileOutcome(c *fsmpb.ReconcileOutcome) *Result {
	if c.Outcome != fsmpb.Outcome_OUTCOME_SUCCEEDED && c.Outcome != fsmpb.Outcome_OUTCOME_FAILED {
		return rejected(reject(CodeInvalid, "a reconciled outcome is succeeded or failed"))
	}
	st, r := a.step(c.StepId)
	if r != nil {
		return rejected(r)
	}
	if st.Outcome != fsmpb.Outcome_OUTCOME_UNKNOWN {
		return rejected(reject(CodeFailedPrecondition, "step %s is %s, not outcome_unknown", st.Id, stepState(st)))
	}
	s, r := a.session(st.SessionId)
	if r != nil {
		return rejected(r)
	}
	st.Outcome = c.Outcome
	a.putStep(st)
	text := fmt.Sprintf("An operator reconciled call %s of %s: it %s.", st.CallId, st.Tool, OutcomeName(c.Outcome))
	if c.Note != "" {
		text += " " + c.Note
	}
	a.appendHistory(s, &fsmpb.HistoryEntry{Kind: fsmpb.HistoryKind_HISTORY_KIND_NOTE, Text: text, CallId: st.CallId, StepId: st.Id})
	a.emit(s.Id, "call_reconciled", st.Id, OutcomeName(c.Outcome))
	a.putSession(s)
	return &Result{SessionID: s.Id, StepID: st.Id}
}

func stepState(st *fsmpb.Step) string {
	if st.Status == fsmpb.StepStatus_STEP_STATUS_DONE {
		return OutcomeName(st.Outcome)
	}
	return st.Status.String()
}

// editHistory is an operator's edit: it clears the rejected-turn count.
func (a *applier) editHistory(c *fsmpb.EditHistory) *Result {
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	if s.Status == fsmpb.SessionStatus_SESSION_STATUS_RUNNING || s.Status == fsmpb.SessionStatus_SESSION_STATUS_WAITING {
		return rejected(reject(CodeFailedPrecondition, "session %s is %s: edit its history when it is idle, errored or paused", s.Id, StatusName(s.Status)))
	}
	if isClosed(s) {
		return rejected(reject(CodeFailedPrecondition, "session %s is closed: its history is kept as it was", s.Id))
	}
	if c.TruncateFromSeq == 0 && c.Note == "" {
		return rejected(reject(CodeInvalid, "an edit truncates the history or adds a note"))
	}
	if c.TruncateFromSeq >= s.NextHistory {
		return rejected(reject(CodeInvalid, "session %s has no history entry at seq %d: its last is %d", s.Id, c.TruncateFromSeq, s.NextHistory-1))
	}
	if c.TruncateFromSeq > 0 {
		a.truncateHistory(s, c.TruncateFromSeq)
	}
	if c.Note != "" {
		a.appendHistory(s, &fsmpb.HistoryEntry{Kind: fsmpb.HistoryKind_HISTORY_KIND_NOTE, Text: c.Note})
	}
	s.RejectedTurns = 0
	a.emit(s.Id, "history_edited", "", "")
	a.putSession(s)
	return &Result{SessionID: s.Id}
}

// StatusName is the documented name of a session status (docs/sessions.md)
// ("idle", …), the same the API's clients print.
func StatusName(st fsmpb.SessionStatus) string {
	return wirerules.SessionStatusName(dexv1.SessionStatus(st))
}
