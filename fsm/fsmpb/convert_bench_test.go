package fsmpb

import (
	"testing"

	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A session in the middle of a turn of three tool calls, its model Step with
// two attempts, the history entry that turn's model output left, and an
// event: what a read or a Worker's task converts to the API's types. Back the
// other way: a Worker's model output with three tool calls and an inline
// result, and a Worker's five registered tools, as they are proposed.
func benchRows() (*Session, *Step, *HistoryEntry, *Event) {
	policy := &ToolSpec{Name: "search", Access: ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 3,
		PollIntervalMs: 1000, Description: "searches the web", RunTimeoutMs: 30000, Agents: []string{"research"}}
	calls := make([]*CallState, 3)
	toolCalls := make([]*ToolCall, 3)
	for i := range calls {
		id := "call-" + string(rune('a'+i))
		calls[i] = &CallState{CallId: id, Tool: "search", Arguments: `{"q":"raft"}`, Policy: policy,
			Phase: CallPhase_CALL_PHASE_RUNNING, StepId: "s-7-" + id, TaskId: "t-" + id, IdempotencyKey: "k-" + id}
		toolCalls[i] = &ToolCall{CallId: id, Tool: "search", Arguments: `{"q":"raft"}`}
	}
	session := &Session{Id: "sess-1", Status: SessionStatus_SESSION_STATUS_RUNNING,
		Turn:                &Turn{Number: 4, Input: TurnInput_TURN_INPUT_MESSAGES, MessageIds: []string{"m-1"}, Calls: calls, StepId: "s-7"},
		CompactionThreshold: 100000, NextStep: 9, NextTurn: 5, NextHistory: 31, CreatedAtMs: 1700000000000,
		UpdatedAtMs: 1700000005000, TurnsCompleted: 3, SeenMessageIds: []string{"m-1", "m-2"}, HistorySize: 42000,
		HistoryCount: 30, InboxCount: 2, NextInbox: 3, MaxModelInput: 200000, Agent: "research"}
	attempts := []*Attempt{
		{N: 1, WorkerId: "w-1", Epoch: 2, Token: "tok-1", Status: AttemptStatus_ATTEMPT_STATUS_FAILED, StartedAtMs: 1, EndedAtMs: 2,
			ErrorType: ErrorType_ERROR_TYPE_NETWORK, Error: "connection reset", DeadlineMs: 3},
		{N: 2, WorkerId: "w-2", Epoch: 2, Token: "tok-2", Status: AttemptStatus_ATTEMPT_STATUS_RUNNING, StartedAtMs: 4, DeadlineMs: 5},
	}
	step := &Step{Id: "s-7", SessionId: "sess-1", Turn: 4, Kind: StepKind_STEP_KIND_RUN_MODEL, TaskId: "t-7",
		Status: StepStatus_STEP_STATUS_RUNNING, ReadyAtMs: 1, DueAtMs: 2, Attempts: attempts, CreatedAtMs: 1,
		QueueSeq: 77, MaxAttempts: 3, Number: 7, Agent: "research"}
	entry := &HistoryEntry{Seq: 30, Kind: HistoryKind_HISTORY_KIND_ASSISTANT, Text: "Let me look that up.",
		ToolCalls: toolCalls, StepId: "s-7", AtMs: 1700000004000, SessionId: "sess-1", CumSize: 41000}
	event := &Event{Seq: 912, SessionId: "sess-1", Type: "step.started", StepId: "s-7", Detail: `{"attempt":2}`, AtMs: 1700000004500, Ordinal: 3}
	return session, step, entry, event
}

func benchReports() (*dexv1.AttemptResult, []*dexv1.ToolSpec) {
	calls := make([]*dexv1.ToolCall, 3)
	for i := range calls {
		calls[i] = &dexv1.ToolCall{CallId: "call-" + string(rune('a'+i)), Tool: "search", Arguments: `{"q":"raft"}`}
	}
	result := &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ModelOutput{ModelOutput: &dexv1.ModelOutput{
		Text: "Let me look that up.", ToolCalls: calls,
		InlineResults: []*dexv1.InlineResult{{CallId: "call-z", Tool: "clock", Arguments: "{}", Content: "10:00"}}}}}
	tools := make([]*dexv1.ToolSpec, 5)
	for i := range tools {
		tools[i] = &dexv1.ToolSpec{Name: "tool-" + string(rune('a'+i)), Access: dexv1.ToolAccess_TOOL_ACCESS_READ,
			MaxAttempts: 3, Description: "a tool", RunTimeoutMs: 30000, Agents: []string{"research"}}
	}
	return result, tools
}

var sinkAPI, sinkStored any

func BenchmarkConvertRows(b *testing.B) {
	session, step, entry, event := benchRows()
	result, tools := benchReports()
	b.Run("SessionToAPI", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkAPI = session.API()
		}
	})
	// What the answer that carries the session costs to encode anyway, for
	// scale.
	b.Run("SessionAPIMarshal", func(b *testing.B) {
		shown := session.API()
		b.ReportAllocs()
		for b.Loop() {
			sinkAPI, _ = proto.Marshal(shown)
		}
	})
	b.Run("StepToAPI", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkAPI = step.API()
		}
	})
	b.Run("HistoryEntryToAPI", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkAPI = entry.API()
		}
	})
	b.Run("EventToAPI", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkAPI = event.API()
		}
	})
	b.Run("AttemptResultFromAPI", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkStored = AttemptResultFromAPI(result)
		}
	})
	b.Run("ToolSpecsFromAPI", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkStored = ToolSpecsFromAPI(tools)
		}
	})
}
