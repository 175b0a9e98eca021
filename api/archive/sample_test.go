package archive

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// sample is a session with some of everything an archive holds (as the
// format's own tests have it).
func sample() *dexv1.ArchivedSession {
	return &dexv1.ArchivedSession{
		Session: &dexv1.Session{
			Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, Agent: "coder@2", TurnsCompleted: 2, HistoryCount: 3,
			History: []*dexv1.HistoryEntry{
				{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "hi", SessionId: "s1"},
				{Seq: 2, Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, ToolCalls: []*dexv1.ToolCall{{CallId: "c1", Tool: "grep", Arguments: `{"q":"x"}`}}},
				{Seq: 4, Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "c1", Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED, Text: "found"},
			},
			Inbox: []*dexv1.Message{{Id: "m9", Text: "later", Seq: 3}},
		},
		LastEventSeq: 12,
		Steps: []*dexv1.Step{
			{Id: "s1-s1", Number: 1, Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Status: dexv1.StepStatus_STEP_STATUS_DONE, Attempts: []*dexv1.Attempt{
				{N: 1, WorkerId: "w1", Status: dexv1.AttemptStatus_ATTEMPT_STATUS_FAILED, ErrorType: dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "slow down"},
				{N: 2, WorkerId: "w2", Status: dexv1.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED},
			}},
			{Id: "s1-s2", Number: 2, Kind: dexv1.StepKind_STEP_KIND_CALL_TOOL, Tool: "grep", Status: dexv1.StepStatus_STEP_STATUS_DONE, Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED},
		},
		Events: []*dexv1.Event{{Seq: 11, SessionId: "s1", Type: "turn_started"}, {Seq: 12, SessionId: "s1", Type: "turn_completed"}},
	}
}
