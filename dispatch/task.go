package dispatch

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/otel/trace"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/tracing"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Builtins are the tools the cluster handles itself; the model sees them with
// the Workers' tools.
var Builtins = []*dexv1.ToolSpec{
	{
		Name: fsm.BuiltinAskUser, Access: dexv1.ToolAccess_TOOL_ACCESS_READ,
		Description: `Ask the user a question and wait for the answer. Arguments: {"question": "..."}`,
	},
	{
		Name: fsm.BuiltinSleep, Access: dexv1.ToolAccess_TOOL_ACCESS_READ,
		Description: `Wait for a number of seconds before the turn goes on. Arguments: {"seconds": N}`,
	},
	{
		Name: fsm.BuiltinResumeAgent, Access: dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE,
		Description: `Resume a paused or errored sub-agent of this session. "retry" runs its kept turn once more; ` +
			`"drop" drops that turn (its tool results become error notes) and lets it go on with its messages. ` +
			`Arguments: {"agent": "ID", "choice": "retry" | "drop"}`,
	},
}

// task builds what a Worker gets for an attempt the state machine started.
// s is the Step as the poller picked it; the fresh state is read for the
// session's history.
func (d *Dispatcher) task(st *fsm.State, s *fsmpb.Step, at *fsmpb.Attempt, epoch uint64) *dexv1.Task {
	if cur := st.Step(s.Id); cur != nil {
		s = cur
	}
	t := &dexv1.Task{
		Ref:                 &dexv1.AttemptRef{StepId: s.Id, Attempt: at.N, Token: at.Token},
		SessionId:           s.SessionId,
		Kind:                dexv1.StepKind(s.Kind),
		Tool:                s.Tool,
		CallId:              s.CallId,
		Arguments:           s.Arguments,
		IdempotencyKey:      s.IdempotencyKey,
		TaskId:              s.TaskId,
		Epoch:               epoch,
		HeartbeatIntervalMs: uint32(d.deadlines.HeartbeatInterval().Milliseconds()),
		HeartbeatTimeoutMs:  uint32(d.deadlines.HeartbeatTimeout().Milliseconds()),
		Access:              dexv1.ToolAccess(s.Policy.GetAccess()),
		Agent:               s.Agent,
	}
	if s.Trace != nil {
		t.Traceparent = tracing.Traceparent(trace.TraceID(s.Trace.TraceId), fsm.AttemptSpanID(s.Trace, s.Id, at.N))
	}
	t.Runner, t.Handler = TaskRoute(s.Kind)
	switch fsm.Kind(s.Kind).Handler {
	case fsm.HandlerModel:
		t.ModelInput = &dexv1.ModelInput{History: fsmpb.HistoryAPI(st.ModelHistory(st.Session(s.SessionId))), Tools: ModelToolsFor(st, s.Agent)}
	case fsm.HandlerCompact:
		t.ModelInput = &dexv1.ModelInput{History: fsmpb.HistoryAPI(st.ToCompact(st.Session(s.SessionId), s.CompactBefore)), Compact: true}
	}
	return t
}

// TaskRoute is how a Worker runs a task of a Step kind, from the kind table:
// who runs it and which handler. The task carries both, so a Worker routes
// by them and no Worker library keeps a copy of the table. A kind no Worker
// runs has neither.
func TaskRoute(k fsmpb.StepKind) (dexv1.TaskRunner, dexv1.TaskHandler) {
	spec := fsm.Kind(k)
	return taskRunners[spec.Runner], taskHandlers[spec.Handler]
}

var (
	taskRunners = map[fsm.Runner]dexv1.TaskRunner{
		fsm.RunsOnModel: dexv1.TaskRunner_TASK_RUNNER_MODEL,
		fsm.RunsOnTool:  dexv1.TaskRunner_TASK_RUNNER_TOOL,
	}
	taskHandlers = map[fsm.Handler]dexv1.TaskHandler{
		fsm.HandlerModel:   dexv1.TaskHandler_TASK_HANDLER_MODEL,
		fsm.HandlerCompact: dexv1.TaskHandler_TASK_HANDLER_COMPACT,
		fsm.HandlerTool:    dexv1.TaskHandler_TASK_HANDLER_TOOL,
		fsm.HandlerPoll:    dexv1.TaskHandler_TASK_HANDLER_POLL,
	}
)

// ModelToolsFor is the tools an agent's model may call: those of ModelTools
// a live Worker serves for the agent, and the built-ins.
func ModelToolsFor(st *fsm.State, agent string) []*dexv1.ToolSpec {
	all := ModelTools(st)
	out := all[:0]
	for _, t := range all {
		if fsm.IsBuiltin(t.Name) || len(st.ToolServersFor(t.Name, agent)) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// ModelTools is the tools the model may call: the tool catalog (one policy
// per name, served by a live Worker) and the built-ins, sorted by name.
func ModelTools(st *fsm.State) []*dexv1.ToolSpec {
	var out []*dexv1.ToolSpec
	for _, t := range st.Tools() {
		out = append(out, t.API())
	}
	for _, t := range Builtins { // a Worker cannot register a built-in's name
		out = append(out, t.CloneVT())
	}
	slices.SortFunc(out, func(a, b *dexv1.ToolSpec) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
