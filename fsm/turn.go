package fsm

import (
	"fmt"
	"strings"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// stepSucceeded records a completed attempt's result and moves the turn on,
// by the Step's kind.
func (a *applier) stepSucceeded(s *fsmpb.Session, st *fsmpb.Step, c *fsmpb.AttemptResult) *Rejection {
	return Kind(st.Kind).succeeded(a, s, st, c)
}

// compactionSucceeded stores the one summary and runs the turn's model.
func (a *applier) compactionSucceeded(s *fsmpb.Session, st *fsmpb.Step, c *fsmpb.AttemptResult) *Rejection {
	a.finish(st, fsmpb.Outcome_OUTCOME_SUCCEEDED, c.GetSummary(), false)
	a.appendHistory(s, &fsmpb.HistoryEntry{Kind: fsmpb.HistoryKind_HISTORY_KIND_SUMMARY, Text: c.GetSummary(), StepId: st.Id})
	s.Summaries++
	s.CompactedBefore = st.CompactBefore
	a.queueModel(s)
	return nil
}

// toolSucceeded records a tool's result; a long-running tool's start gives
// the task the next Steps poll.
func (a *applier) toolSucceeded(s *fsmpb.Session, st *fsmpb.Step, c *fsmpb.AttemptResult) *Rejection {
	res := c.GetToolResult()
	call := findCall(s, st.CallId)
	if call == nil {
		return reject(CodeFailedPrecondition, "step %s belongs to no call of the turn in progress", st.Id)
	}
	if call.Policy.GetLongRunning() {
		if res.TaskId == "" && !res.IsError {
			return reject(CodeInvalid, "long-running tool %q returned no task id", st.Tool)
		}
		if !res.IsError {
			st.TaskId = res.TaskId
			a.finish(st, fsmpb.Outcome_OUTCOME_SUCCEEDED, "task "+res.TaskId, false)
			call.TaskId = res.TaskId
			a.queuePoll(s, call)
			return nil
		}
	}
	a.finish(st, toolOutcome(res), res.Content, res.IsError)
	a.resolveCall(s, call, toolOutcome(res), res.Content)
	a.afterCallChange(s)
	return nil
}

// pollSucceeded polls again until the task is done, then records its result.
func (a *applier) pollSucceeded(s *fsmpb.Session, st *fsmpb.Step, c *fsmpb.AttemptResult) *Rejection {
	pr := c.GetPollResult()
	call := findCall(s, st.CallId)
	if call == nil {
		return reject(CodeFailedPrecondition, "step %s belongs to no call of the turn in progress", st.Id)
	}
	if !pr.Done {
		a.finish(st, fsmpb.Outcome_OUTCOME_SUCCEEDED, "running", false)
		a.queuePoll(s, call)
		return nil
	}
	res := pr.GetResult()
	a.finish(st, toolOutcome(res), res.GetContent(), res.GetIsError())
	a.resolveCall(s, call, toolOutcome(res), res.GetContent())
	a.afterCallChange(s)
	return nil
}

func toolOutcome(r *fsmpb.ToolResult) fsmpb.Outcome {
	if r.GetIsError() {
		return fsmpb.Outcome_OUTCOME_FAILED
	}
	return fsmpb.Outcome_OUTCOME_SUCCEEDED
}

// modelOutput commits a RunModel output: it clears the rejected-turn count and
// closes any error episode, then ends the turn or starts its tool calls.
func (a *applier) modelOutput(s *fsmpb.Session, st *fsmpb.Step, out *fsmpb.ModelOutput) {
	a.finish(st, fsmpb.Outcome_OUTCOME_SUCCEEDED, out.Text, false)
	a.recordModelOutput(s, st, out)
	s.RejectedTurns = 0
	s.ErrorEpisode = false
	s.EpisodeResumes = 0
	s.LastError, s.LastErrorType = "", fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED
	a.appendHistory(s, &fsmpb.HistoryEntry{
		Kind: fsmpb.HistoryKind_HISTORY_KIND_ASSISTANT, Text: out.Text, ToolCalls: out.ToolCalls,
		InlineResults: out.InlineResults, StepId: st.Id,
	})
	s.Turn.StepId = ""
	if len(out.ToolCalls) == 0 {
		a.endTurn(s)
		return
	}
	a.startCalls(s, out.ToolCalls)
}

// modelAttemptFailed applies docs/model-failures.md to a failed RunModel attempt.
func (a *applier) modelAttemptFailed(s *fsmpb.Session, st *fsmpb.Step, at *fsmpb.Attempt) {
	if RetriedInStep(at.ErrorType) && len(st.Attempts) < int(st.MaxAttempts) && a.withinWindow(st) {
		a.requeue(st)
		return
	}
	a.modelStepFailed(s, st, at.ErrorType, at.Error, errorText(at))
}

// modelStepFailed ends a RunModel Step that runs no further attempt and
// applies docs/model-failures.md to the turn.
func (a *applier) modelStepFailed(s *fsmpb.Session, st *fsmpb.Step, typ fsmpb.ErrorType, msg, text string) {
	retryable := Retryable(typ)
	st.ErrorType = typ
	a.finish(st, fsmpb.Outcome_OUTCOME_FAILED, msg, true)
	s.LastError, s.LastErrorType = text, typ
	s.Turn.StepId = ""
	a.noteToolsRan(s)
	switch {
	case retryable:
		// The input is kept; the cluster resumes the session with a capped
		// backoff. The parent hears of it once per episode.
		first := !s.ErrorEpisode
		if first {
			s.ErrorEpisode = true
			s.EpisodeResumes = 0
		}
		a.setErrored(s, first)
		s.ResumeAtMs = a.now + resumeBackoff(s.EpisodeResumes)
	case s.Turn.Input == fsmpb.TurnInput_TURN_INPUT_TOOL_RESULTS:
		// The pending tool results survive, so the same request would be
		// rebuilt: count the rejection, and pause at the limit.
		s.RejectedTurns++
		s.ErrorEpisode = false
		if s.RejectedTurns >= RejectedTurnLimit {
			a.pause(s)
			return
		}
		a.setErrored(s, true)
	default:
		// The inbox messages are consumed by the failure.
		t := s.Turn
		s.Turn = nil
		s.TurnsFailed++
		s.ErrorEpisode = false
		a.setErrored(s, true)
		a.turnEnded(s, t, "failed")
		if s.InboxCount > 0 {
			a.startTurn(s)
		}
	}
}

func errorText(at *fsmpb.Attempt) string {
	msg := at.Error
	if msg == "" {
		msg = "no error message"
	}
	if at.ErrorType != fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED {
		return ErrorTypeName(at.ErrorType) + ": " + msg
	}
	return msg
}

// ErrorTypeName is the documented name of an error type ("rate_limit", …).
func ErrorTypeName(t fsmpb.ErrorType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "ERROR_TYPE_"))
}

func (a *applier) setErrored(s *fsmpb.Session, tellParent bool) {
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_ERRORED
	s.ResumeAtMs = 0
	a.emit(s.Id, "session_errored", "", s.LastError)
	if tellParent {
		a.tellParent(s, fmt.Sprintf("<child-error agent=%q>agent encountered an error: %s</child-error>", s.Id, s.LastError))
	}
}

func (a *applier) pause(s *fsmpb.Session) {
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_PAUSED
	s.PauseReason = fsmpb.PauseReason_PAUSE_REASON_LIMIT
	s.ResumeAtMs = 0
	if s.RejectedTurns == RejectedTurnLimit {
		s.PauseMessage = fmt.Sprintf("The provider rejected this turn %d times in a row and the agent will not retry it on its own. Last error: %s", s.RejectedTurns, s.LastError)
	} else { // rejected again after a resume
		s.PauseMessage = fmt.Sprintf("The provider rejected this turn again after it was resumed, and the agent will not retry it on its own. Last error: %s", s.LastError)
	}
	a.emit(s.Id, "session_paused", "", s.PauseMessage)
	a.tellParent(s, fmt.Sprintf("<child-paused agent=%q>%s</child-paused>", s.Id, s.PauseMessage))
}

// toolsRanNote begins the do-not-repeat note.
const toolsRanNote = "The model call of the previous turn failed after these tools already ran: "

// noteToolsRan tells the next turn's model not to repeat tools that already
// ran in a turn whose model call failed for good: once per call in a turn,
// however many times the turn fails.
func (a *applier) noteToolsRan(s *fsmpb.Session) {
	if s.Turn == nil || int(s.Turn.NotedRanCalls) >= len(s.Turn.RanCalls) {
		return
	}
	fresh := s.Turn.RanCalls[s.Turn.NotedRanCalls:]
	s.Turn.NotedRanCalls = uint32(len(s.Turn.RanCalls))
	var parts []string
	for _, id := range fresh {
		if c := findCall(s, id); c != nil {
			parts = append(parts, fmt.Sprintf("%s (call %s, %s)", c.Tool, c.CallId, OutcomeName(c.Outcome)))
		} else {
			parts = append(parts, id)
		}
	}
	a.appendHistory(s, &fsmpb.HistoryEntry{
		Kind: fsmpb.HistoryKind_HISTORY_KIND_NOTE,
		Text: toolsRanNote + strings.Join(parts, ", ") + ". Do not call them again; use their results above.",
	})
}

// compactionAttemptFailed: only the summary call runs again, within the same
// bounds as RunModel; when they are spent the turn fails and the next message
// compacts again.
func (a *applier) compactionAttemptFailed(s *fsmpb.Session, st *fsmpb.Step, at *fsmpb.Attempt) {
	if len(st.Attempts) < int(st.MaxAttempts) && a.withinWindow(st) {
		a.requeue(st)
		return
	}
	a.compactionStepFailed(s, st, at)
}

// compactionStepFailed ends a CompactContext Step that runs no further
// attempt: the turn fails and the next message compacts again.
func (a *applier) compactionStepFailed(s *fsmpb.Session, st *fsmpb.Step, at *fsmpb.Attempt) {
	st.ErrorType = at.ErrorType
	a.finish(st, fsmpb.Outcome_OUTCOME_FAILED, at.Error, true)
	s.LastError, s.LastErrorType = "compaction failed: "+errorText(at), at.ErrorType
	t := s.Turn
	s.Turn = nil
	s.TurnsFailed++
	a.setErrored(s, true)
	a.turnEnded(s, t, "failed")
}

// toolAttemptFailed retries a tool Step by its policy; after the last attempt
// the call records failed or outcome_unknown from the attempt progress.
func (a *applier) toolAttemptFailed(s *fsmpb.Session, st *fsmpb.Step, at *fsmpb.Attempt) {
	if len(st.Attempts) < int(st.MaxAttempts) {
		a.requeue(st)
		return
	}
	o, content := finalToolOutcome(st, at)
	a.finish(st, o, content, true)
	if c := findCall(s, st.CallId); c != nil {
		a.resolveCall(s, c, o, content)
		a.afterCallChange(s)
	}
}

func finalToolOutcome(st *fsmpb.Step, last *fsmpb.Attempt) (fsmpb.Outcome, string) {
	why := last.Error
	if why == "" {
		why = "no error message"
	}
	if st.Kind == fsmpb.StepKind_STEP_KIND_POLL_TOOL_TASK {
		// The task's start ran: a poll is never reported as not run.
		if st.Policy.GetAccess() == fsmpb.ToolAccess_TOOL_ACCESS_READ {
			return fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("task %s was started, but its status could not be read after %d attempts: %s", st.TaskId, len(st.Attempts), why)
		}
		return fsmpb.Outcome_OUTCOME_UNKNOWN, fmt.Sprintf("task %s was started and may have done its work; its status could not be read after %d attempts and it will not be started again (%s)", st.TaskId, len(st.Attempts), why)
	}
	if last.Progress == fsmpb.AttemptProgress_ATTEMPT_PROGRESS_NOT_STARTED {
		return fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("%s: %s", NotRunPrefix, why)
	}
	if st.Policy.GetAccess() == fsmpb.ToolAccess_TOOL_ACCESS_READ {
		return fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("the tool failed after %d attempts: %s", len(st.Attempts), why)
	}
	return fsmpb.Outcome_OUTCOME_UNKNOWN, fmt.Sprintf("the outcome of this call is unknown: the tool may have run and will not be run again (%s)", why)
}
