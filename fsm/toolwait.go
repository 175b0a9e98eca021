package fsm

import (
	"fmt"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// unknownTool is the reason a call of a tool no Worker serves fails with.
func unknownTool(tool, why string) string {
	return fmt.Sprintf("unknown tool %q: %s", tool, why)
}

// failUnservedStep ends a queued Step that no live Worker served for the
// leader's tool wait: its tool (for its agent), or its agent's model.
//
// A tool Step that never ran records failed with the not-run prefix, as a
// call of an unknown tool does; one that may have run (an earlier attempt
// was claimed) records what its last attempt would. A model Step fails its
// turn without an error type: the session is errored, keeps its input and
// resumes with the error-resume backoff, so a Worker of its agent that comes
// later picks it up.
func (a *applier) failUnservedStep(c *fsmpb.FailUnservedStep) *Result {
	st, r := a.step(c.StepId)
	if r != nil {
		return rejected(r)
	}
	if st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		return rejected(reject(CodeFailedPrecondition, "step %s is not queued (status %s)", st.Id, st.Status))
	}
	runner := Kind(st.Kind).Runner
	if runner == RunsInCluster {
		return rejected(reject(CodeFailedPrecondition, "step %s is a %s: no Worker runs it", st.Id, KindName(st.Kind)))
	}
	if runner == RunsOnModel && st.Agent == "" {
		// As before agents: the default agent's model Steps wait for a
		// model Worker as long as it takes.
		return rejected(reject(CodeFailedPrecondition, "step %s is a %s of the default agent: it waits for a Worker that runs the model", st.Id, KindName(st.Kind)))
	}
	state := &State{tx: a.tx}
	if servers := state.StepServers(st); len(servers) > 0 {
		if runner == RunsOnModel {
			return rejected(reject(CodeFailedPrecondition, "%s of step %s is served by live worker %q", AgentName(st.Agent), st.Id, servers[0]))
		}
		return rejected(reject(CodeFailedPrecondition, "tool %q of step %s is served by live worker %q", st.Tool, st.Id, servers[0]))
	}
	s, r := a.session(st.SessionId)
	if r != nil {
		return rejected(r)
	}
	waited := time.Duration(c.WaitedMs) * time.Millisecond
	switch {
	case runner == RunsOnModel:
		why := fmt.Sprintf("no live Worker served %s (its model) for %s", AgentName(st.Agent), waited)
		if st.Kind == fsmpb.StepKind_STEP_KIND_COMPACT_CONTEXT {
			a.compactionStepFailed(s, st, &fsmpb.Attempt{Error: why})
		} else {
			a.modelStepFailed(s, st, fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED, why, why)
		}
		a.putSession(s)
		return &Result{SessionID: st.SessionId, StepID: st.Id}
	case len(state.ToolServers(st.Tool)) > 0:
		// Served, but not for this session's agent.
		a.failToolStep(s, st, unknownTool(st.Tool, fmt.Sprintf("no live Worker served it for %s for %s", AgentName(st.Agent), waited)))
	default:
		a.failToolStep(s, st, unknownTool(st.Tool, fmt.Sprintf("no live Worker served it for %s", waited)))
	}
	a.putSession(s)
	return &Result{SessionID: st.SessionId, StepID: st.Id}
}

func (a *applier) failToolStep(s *fsmpb.Session, st *fsmpb.Step, why string) {
	o, content := finalToolOutcome(st, &fsmpb.Attempt{Progress: a.progress(s, st), Error: why})
	a.finish(st, o, content, true)
	if call := findCall(s, st.CallId); call != nil {
		a.resolveCall(s, call, o, content)
		a.afterCallChange(s)
	}
}
