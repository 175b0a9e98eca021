package fsm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// dropKeptTurn ends a kept turn as failed rather than retrying it: the tool
// results the provider kept rejecting become short error notes (the model
// still learns what each call did), the rejected-turn count clears as for an
// operator's edit, and the session goes on with its inbox.
func (a *applier) dropKeptTurn(s *fsmpb.Session) {
	t := s.Turn
	if t.Input == fsmpb.TurnInput_TURN_INPUT_TOOL_RESULTS && t.ResultsFromSeq > 0 && t.ResultsFromSeq < s.NextHistory {
		a.replaceResults(s, t)
	}
	s.Turn = nil
	a.turnEnded(s, t, "dropped")
	s.TurnsFailed++
	s.RejectedTurns = 0
	s.ErrorEpisode, s.EpisodeResumes = false, 0
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_IDLE
	s.PauseReason, s.PauseMessage = fsmpb.PauseReason_PAUSE_REASON_UNSPECIFIED, ""
	s.ResumeAtMs = 0
	a.emit(s.Id, "turn_dropped", "", fmt.Sprint(t.Number))
	if s.InboxCount > 0 {
		a.startTurn(s)
	}
}

// replaceResults cuts the history back to where the turn's latest tool
// results begin and writes it again: each result as a short error note, the
// do-not-repeat note left out (the notes say what ran), anything else as it was.
func (a *applier) replaceResults(s *fsmpb.Session, t *fsmpb.Turn) {
	var kept []*fsmpb.HistoryEntry
	a.tx.SessionRows(store.TableHistory, s.Id, t.ResultsFromSeq, func(raw any) bool {
		kept = append(kept, raw.(*fsmpb.HistoryEntry))
		return true
	})
	a.truncateHistory(s, t.ResultsFromSeq)
	why := s.LastError
	if why == "" {
		why = "no error message"
	}
	for _, old := range kept {
		switch {
		case old.Kind == fsmpb.HistoryKind_HISTORY_KIND_TOOL_RESULT && findCall(s, old.CallId) != nil:
			a.appendHistory(s, &fsmpb.HistoryEntry{
				Kind: fsmpb.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: old.CallId, Tool: old.Tool, Arguments: old.Arguments,
				Outcome: old.Outcome, StepId: old.StepId,
				Text: fmt.Sprintf("This call %s, but its result was dropped: the provider rejected the turn that carried it (%s).", OutcomeName(old.Outcome), why),
			})
		case old.Kind == fsmpb.HistoryKind_HISTORY_KIND_NOTE && strings.HasPrefix(old.Text, toolsRanNote):
		default:
			e := old.CloneVT()
			e.Seq, e.CumSize = 0, 0
			a.appendHistory(s, e)
		}
	}
}

// resumeAgentArgs are the arguments of the built-in resume_agent.
type resumeAgentArgs struct {
	Agent  string `json:"agent"`
	Choice string `json:"choice"`
}

// resumeAgent runs the built-in resume_agent for parent's call c: the parent's
// model resumes its own paused or errored child. It answers at once.
func (a *applier) resumeAgent(parent *fsmpb.Session, c *fsmpb.CallState) {
	o, text := a.resumeChild(parent, c.Arguments)
	a.resolveCall(parent, c, o, text)
}

func (a *applier) resumeChild(parent *fsmpb.Session, args string) (fsmpb.Outcome, string) {
	failed := func(format string, v ...any) (fsmpb.Outcome, string) {
		return fsmpb.Outcome_OUTCOME_FAILED, "resume_agent: " + fmt.Sprintf(format, v...)
	}
	var in resumeAgentArgs
	if err := json.Unmarshal([]byte(args), &in); err != nil || in.Agent == "" {
		return failed(`arguments must be {"agent": ID, "choice": "retry" or "drop"}, got %q`, strings.TrimSpace(args))
	}
	choice := fsmpb.ResumeChoice_RESUME_CHOICE_RETRY
	switch in.Choice {
	case "", "retry":
	case "drop":
		choice = fsmpb.ResumeChoice_RESUME_CHOICE_DROP
	default:
		return failed(`choice must be "retry" or "drop", got %q`, in.Choice)
	}
	child, r := a.session(in.Agent)
	if r != nil || child.ParentId != parent.Id {
		return failed("agent %q is not a sub-agent of this session", in.Agent)
	}
	// Whatever the child tells its parent now goes to the parent in hand,
	// not to a stale copy of its row.
	a.held = parent
	defer func() { a.held = nil }()
	if r := a.resume(child, choice); r != nil {
		return failed("agent %q is %s: only a paused or errored agent can be resumed", child.Id, StatusName(child.Status))
	}
	a.putSession(child)
	return fsmpb.Outcome_OUTCOME_SUCCEEDED, fmt.Sprintf("agent %q resumed (%s); it is %s now", child.Id, ResumeChoiceName(choice), StatusName(child.Status))
}
