package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Runner says who runs a Step of a kind.
type Runner int

const (
	// RunsInCluster: a wait (approval, answer, timer); never dispatched.
	RunsInCluster Runner = iota
	// RunsOnModel: a Worker that runs the model.
	RunsOnModel
	// RunsOnTool: a Worker that serves the Step's tool.
	RunsOnTool
)

// Handler names the Worker handler a dispatched kind runs.
type Handler int

const (
	HandlerNone Handler = iota
	HandlerModel
	HandlerCompact
	HandlerTool
	HandlerPoll
)

// KindSpec is how one Step kind behaves: who runs it, which result completes
// it, how many attempts it gets, and what success and a failed attempt do.
// It is the one place that says so; dispatch and the Worker library read it.
type KindSpec struct {
	Kind    fsmpb.StepKind
	Name    string // the documented name ("RunModel", …; docs/turn-loop.md)
	Runner  Runner
	Handler Handler
	// Result reports whether a Worker's AttemptResult is the success this kind
	// completes with (nil for a wait, which no Worker completes).
	Result func(*fsmpb.AttemptResult) bool
	// Attempts is the number of attempts a Step of this kind gets under a
	// tool policy (nil policy for model Steps); 0 for a wait.
	Attempts func(*fsmpb.ToolSpec) uint32
	// succeeded records a completed attempt's result and moves the turn on.
	succeeded func(a *applier, s *fsmpb.Session, st *fsmpb.Step, c *fsmpb.AttemptResult) *Rejection
	// failed applies the retry policy to a failed or expired attempt.
	failed func(a *applier, s *fsmpb.Session, st *fsmpb.Step, at *fsmpb.Attempt)
}

func modelAttempts(*fsmpb.ToolSpec) uint32 { return ModelMaxAttempts }
func noAttempts(*fsmpb.ToolSpec) uint32    { return 0 }

// pollAttempts: a poll retries by the tool's count even for a single-attempt
// tool: polling runs no side effect.
func pollAttempts(p *fsmpb.ToolSpec) uint32 {
	return max(toolAttempts(&fsmpb.ToolSpec{MaxAttempts: p.GetMaxAttempts()}), 1)
}

var kindTable = []*KindSpec{
	{
		Kind: fsmpb.StepKind_STEP_KIND_RUN_MODEL, Name: "RunModel", Runner: RunsOnModel, Handler: HandlerModel,
		Result:   func(c *fsmpb.AttemptResult) bool { return c.GetModelOutput() != nil },
		Attempts: modelAttempts,
		succeeded: func(a *applier, s *fsmpb.Session, st *fsmpb.Step, c *fsmpb.AttemptResult) *Rejection {
			a.modelOutput(s, st, c.GetModelOutput())
			return nil
		},
		failed: (*applier).modelAttemptFailed,
	},
	{
		Kind: fsmpb.StepKind_STEP_KIND_CALL_TOOL, Name: "CallTool", Runner: RunsOnTool, Handler: HandlerTool,
		Result: toolResultFits, Attempts: toolAttempts, succeeded: (*applier).toolSucceeded, failed: (*applier).toolAttemptFailed,
	},
	{
		Kind: fsmpb.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL, Name: "CallSingleAttemptTool", Runner: RunsOnTool, Handler: HandlerTool,
		Result: toolResultFits, Attempts: toolAttempts, succeeded: (*applier).toolSucceeded, failed: (*applier).toolAttemptFailed,
	},
	{Kind: fsmpb.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL, Name: "AwaitToolApproval", Attempts: noAttempts},
	{Kind: fsmpb.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER, Name: "AwaitQuestionAnswer", Attempts: noAttempts},
	{Kind: fsmpb.StepKind_STEP_KIND_AWAIT_TIMER, Name: "AwaitTimer", Attempts: noAttempts},
	{
		Kind: fsmpb.StepKind_STEP_KIND_POLL_TOOL_TASK, Name: "PollToolTask", Runner: RunsOnTool, Handler: HandlerPoll,
		Result:   func(c *fsmpb.AttemptResult) bool { return c.GetPollResult() != nil },
		Attempts: pollAttempts, succeeded: (*applier).pollSucceeded, failed: (*applier).toolAttemptFailed,
	},
	{
		Kind: fsmpb.StepKind_STEP_KIND_COMPACT_CONTEXT, Name: "CompactContext", Runner: RunsOnModel, Handler: HandlerCompact,
		Result: func(c *fsmpb.AttemptResult) bool {
			_, ok := c.Outcome.(*fsmpb.AttemptResult_Summary)
			return ok
		},
		Attempts: modelAttempts, succeeded: (*applier).compactionSucceeded, failed: (*applier).compactionAttemptFailed,
	},
}

func toolResultFits(c *fsmpb.AttemptResult) bool { return c.GetToolResult() != nil }

// kindsByKind is filled in init: the table's handlers reach Kind, so a
// package-level initializer would be a cycle.
var kindsByKind = map[fsmpb.StepKind]*KindSpec{}

func init() {
	for _, k := range kindTable {
		kindsByKind[k.Kind] = k
	}
}

// unknownKind answers for a kind this build does not know: nobody runs it.
var unknownKind = &KindSpec{Name: "Unknown", Attempts: noAttempts}

// Kind returns how a Step kind behaves. The spec is shared: do not modify.
func Kind(k fsmpb.StepKind) *KindSpec {
	if spec := kindsByKind[k]; spec != nil {
		return spec
	}
	return unknownKind
}

// KindName is the documented name of a Step kind ("RunModel", "CallTool", …).
func KindName(k fsmpb.StepKind) string { return Kind(k).Name }

// Dispatched reports whether Steps of the kind are handed to Workers.
func (k *KindSpec) Dispatched() bool { return k.Runner != RunsInCluster }
