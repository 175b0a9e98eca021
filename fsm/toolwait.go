package fsm

import (
	"fmt"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// unknownTool is the reason a call of a tool no Worker serves fails with.
func unknownTool(tool, why string) string {
	return fmt.Sprintf("unknown tool %q: %s", tool, why)
}

// failUnservedStep ends a queued tool Step whose tool no live Worker served
// for the leader's tool wait. A Step that never ran records failed with the
// not-run prefix, as a call of an unknown tool does; one that may have run
// (an earlier attempt was claimed) records what its last attempt would.
func (a *applier) failUnservedStep(c *dexv1.FailUnservedStep) *Result {
	if r := a.checkEpoch(c.Epoch); r != nil {
		return rejected(r)
	}
	st, r := a.step(c.StepId)
	if r != nil {
		return rejected(r)
	}
	if st.Status != dexv1.StepStatus_STEP_STATUS_QUEUED {
		return rejected(reject(CodeFailedPrecondition, "step %s is not queued (status %s)", st.Id, st.Status))
	}
	if Kind(st.Kind).Runner != RunsOnTool {
		return rejected(reject(CodeFailedPrecondition, "step %s is a %s: it runs no tool", st.Id, KindName(st.Kind)))
	}
	if servers := a.toolServers(st.Tool); len(servers) > 0 {
		return rejected(reject(CodeFailedPrecondition, "tool %q of step %s is served by live worker %q", st.Tool, st.Id, servers[0]))
	}
	s, r := a.session(st.SessionId)
	if r != nil {
		return rejected(r)
	}
	why := unknownTool(st.Tool, fmt.Sprintf("no live Worker served it for %s", time.Duration(c.WaitedMs)*time.Millisecond))
	o, content := finalToolOutcome(st, &dexv1.Attempt{Progress: a.progress(s, st), Error: why})
	a.finish(st, o, content, true)
	if call := findCall(s, st.CallId); call != nil {
		a.resolveCall(s, call, o, content)
		a.afterCallChange(s)
	}
	a.putSession(s)
	return &Result{SessionID: st.SessionId, StepID: st.Id}
}
