package fsm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func findCall(s *fsmpb.Session, callID string) *fsmpb.CallState {
	if s.Turn == nil || callID == "" {
		return nil
	}
	for _, c := range s.Turn.Calls {
		if c.CallId == callID {
			return c
		}
	}
	return nil
}

// markCallRan records that a call's side effect may have happened.
func (a *applier) markCallRan(s *fsmpb.Session, callID string) {
	c := findCall(s, callID)
	if c == nil || c.Ran {
		return
	}
	c.Ran = true
	s.Turn.RanCalls = append(s.Turn.RanCalls, c.CallId)
}

// startCalls turns the tool calls of a model output into Steps, by policy. The
// calls of one output run in parallel.
func (a *applier) startCalls(s *fsmpb.Session, calls []*fsmpb.ToolCall) {
	s.Turn.Calls = nil
	s.Turn.ResultsFromSeq = s.NextHistory
	for _, tc := range calls {
		c := &fsmpb.CallState{CallId: tc.CallId, Tool: tc.Tool, Arguments: tc.Arguments}
		s.Turn.Calls = append(s.Turn.Calls, c)
	}
	for _, c := range s.Turn.Calls {
		a.startCall(s, c)
	}
	a.afterCallChange(s)
}

func (a *applier) startCall(s *fsmpb.Session, c *fsmpb.CallState) {
	switch c.Tool {
	case BuiltinAskUser:
		c.Builtin = BuiltinAskUser
		c.Phase = fsmpb.CallPhase_CALL_PHASE_WAITING
		c.StepId = a.queueStep(s, &fsmpb.Step{
			Kind: fsmpb.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER, CallId: c.CallId, Tool: c.Tool, Arguments: c.Arguments,
			Status: fsmpb.StepStatus_STEP_STATUS_WAITING, Prompt: questionOf(c.Arguments),
		})
		return
	case BuiltinSleep:
		c.Builtin = BuiltinSleep
		ms, err := sleepMillis(c.Arguments)
		if err != nil {
			a.resolveCall(s, c, fsmpb.Outcome_OUTCOME_FAILED, "sleep: "+err.Error())
			return
		}
		c.Phase = fsmpb.CallPhase_CALL_PHASE_WAITING
		c.StepId = a.queueStep(s, &fsmpb.Step{
			Kind: fsmpb.StepKind_STEP_KIND_AWAIT_TIMER, CallId: c.CallId, Tool: c.Tool, Arguments: c.Arguments,
			Status: fsmpb.StepStatus_STEP_STATUS_WAITING, DueAtMs: a.now + ms,
		})
		return
	case BuiltinResumeAgent:
		c.Builtin = BuiltinResumeAgent
		a.resumeAgent(s, c)
		return
	}
	spec := a.toolSpec(c.Tool)
	if spec == nil {
		a.resolveCall(s, c, fsmpb.Outcome_OUTCOME_FAILED, NotRunPrefix+": "+unknownTool(c.Tool, "no Worker registered it"))
		return
	}
	c.Policy = spec
	if spec.Inline {
		a.resolveCall(s, c, fsmpb.Outcome_OUTCOME_FAILED, fmt.Sprintf("%s: tool %q is inline: its result belongs inside the model output", NotRunPrefix, c.Tool))
		return
	}
	if spec.Access != fsmpb.ToolAccess_TOOL_ACCESS_READ {
		c.IdempotencyKey = IdempotencyKey(s.Id, c.CallId)
	}
	if spec.NeedsApproval {
		c.Phase = fsmpb.CallPhase_CALL_PHASE_AWAITING_APPROVAL
		c.StepId = a.queueStep(s, &fsmpb.Step{
			Kind: fsmpb.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL, CallId: c.CallId, Tool: c.Tool, Arguments: c.Arguments,
			Policy: spec, Status: fsmpb.StepStatus_STEP_STATUS_WAITING,
			Prompt: fmt.Sprintf("run %s(%s)?", c.Tool, c.Arguments),
		})
		return
	}
	a.queueToolStep(s, c)
}

// queueToolStep queues the Step that runs (or starts) the tool.
func (a *applier) queueToolStep(s *fsmpb.Session, c *fsmpb.CallState) {
	kind := fsmpb.StepKind_STEP_KIND_CALL_TOOL
	if c.Policy.Access == fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT {
		kind = fsmpb.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL
	}
	c.Phase = fsmpb.CallPhase_CALL_PHASE_RUNNING
	c.StepId = a.queueStep(s, &fsmpb.Step{
		Kind: kind, CallId: c.CallId, Tool: c.Tool, Arguments: c.Arguments, Policy: c.Policy,
		IdempotencyKey: c.IdempotencyKey,
	})
}

// queuePoll queues the next poll of a long-running task.
func (a *applier) queuePoll(s *fsmpb.Session, c *fsmpb.CallState) {
	c.Phase = fsmpb.CallPhase_CALL_PHASE_POLLING
	c.StepId = a.queueStep(s, &fsmpb.Step{
		Kind: fsmpb.StepKind_STEP_KIND_POLL_TOOL_TASK, CallId: c.CallId, Tool: c.Tool, Arguments: c.Arguments,
		Policy: c.Policy, TaskId: c.TaskId, ReadyAtMs: a.now + pollEvery(c.Policy),
	})
}

// resolveCall gives a call its outcome and records it in the history. The
// content is kept there only: the session's header holds the turn's calls,
// and a copy of every result in it would grow the header by each of them.
func (a *applier) resolveCall(s *fsmpb.Session, c *fsmpb.CallState, o fsmpb.Outcome, content string) {
	c.Phase = fsmpb.CallPhase_CALL_PHASE_DONE
	c.Outcome = o
	a.appendHistory(s, &fsmpb.HistoryEntry{
		Kind: fsmpb.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: c.CallId, Tool: c.Tool, Arguments: c.Arguments,
		Outcome: o, Text: content, StepId: c.StepId,
	})
	a.emit(s.Id, "call_"+OutcomeName(o), c.StepId, c.CallId)
}

// afterCallChange moves the turn on once every call of the output has an
// outcome (a tool-result turn), and keeps the session status in step.
func (a *applier) afterCallChange(s *fsmpb.Session) {
	if s.Turn == nil {
		return
	}
	waiting, busy := false, false
	for _, c := range s.Turn.Calls {
		switch c.Phase {
		case fsmpb.CallPhase_CALL_PHASE_DONE:
		case fsmpb.CallPhase_CALL_PHASE_WAITING, fsmpb.CallPhase_CALL_PHASE_AWAITING_APPROVAL:
			waiting = true
		default:
			busy = true
		}
	}
	switch {
	case busy:
		s.Status = fsmpb.SessionStatus_SESSION_STATUS_RUNNING
	case waiting:
		s.Status = fsmpb.SessionStatus_SESSION_STATUS_WAITING
	default:
		s.Turn.Input = fsmpb.TurnInput_TURN_INPUT_TOOL_RESULTS
		a.queueModel(s)
	}
}

func questionOf(args string) string {
	var q struct {
		Question string `json:"question"`
	}
	if json.Unmarshal([]byte(args), &q) == nil && q.Question != "" {
		return q.Question
	}
	return args
}

const maxSleep = 7 * 24 * 3600 * 1000

func sleepMillis(args string) (int64, error) {
	var v struct {
		Seconds *float64 `json:"seconds"`
	}
	if err := json.Unmarshal([]byte(args), &v); err != nil || v.Seconds == nil {
		return 0, fmt.Errorf(`arguments must be {"seconds": N}, got %q`, strings.TrimSpace(args))
	}
	ms := int64(*v.Seconds * 1000)
	if ms < 0 || ms > maxSleep {
		return 0, fmt.Errorf("seconds must be between 0 and %d", maxSleep/1000)
	}
	return ms, nil
}
