package fsm

import (
	"fmt"
	"slices"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Agents. A session names the agent that runs it (NAME or NAME@VERSION, ""
// for the default agent); its Steps carry that name. A Worker registers the
// agents whose model it runs and, per tool, the agents it serves the tool
// for (none listed: every agent). A Step goes only to a Worker that serves
// its agent, matched exactly: a Worker of "bot@2" never runs "bot@1".

// DefaultAgentName is how people see the default agent ("").
const DefaultAgentName = "the default agent"

// AgentName is how messages name an agent.
func AgentName(agent string) string {
	if agent == "" {
		return DefaultAgentName
	}
	return fmt.Sprintf("agent %q", agent)
}

// CheckAgent refuses an agent name that is not an id (IDChars, at most 200
// bytes). Empty is the default agent. The rule is wirerules.CheckAgent,
// which the Worker library applies too.
func CheckAgent(agent string) *Rejection { return invalid(wirerules.CheckAgent(agent)) }

// checkAgentList refuses an empty, invalid or repeated name in a list of
// agents (what says whose: "worker agents", "tool \"x\" agents").
func checkAgentList(what string, agents []string) *Rejection {
	seen := map[string]bool{}
	for _, ag := range agents {
		if ag == "" {
			return reject(CodeInvalid, "%s: an empty agent name (leave the list empty for the default agent)", what)
		}
		if r := CheckID("agent", ag); r != nil {
			return reject(CodeInvalid, "%s: %s", what, r.Reason)
		}
		if seen[ag] {
			return reject(CodeInvalid, "%s: agent %q is listed twice", what, ag)
		}
		seen[ag] = true
	}
	return nil
}

// checkRegistrationAgents validates the agents of a Worker registration.
func checkRegistrationAgents(c *fsmpb.RegisterWorker) *Rejection {
	if len(c.Agents) > 0 && !c.RunsModel {
		return reject(CodeInvalid, "worker %q lists agents but runs no model: list the agents of each tool in its agents", c.WorkerId)
	}
	if r := checkAgentList("worker agents", c.Agents); r != nil {
		return r
	}
	for _, t := range c.Tools {
		if r := checkAgentList(fmt.Sprintf("tool %q agents", t.Name), t.Agents); r != nil {
			return r
		}
	}
	return nil
}

// sessionAgent is the agent of a new session: the one it names, else its
// parent's (a sub-agent runs as its parent unless told otherwise).
func sessionAgent(c *fsmpb.CreateSession, parent *fsmpb.Session) (string, *Rejection) {
	if r := CheckAgent(c.Agent); r != nil {
		return "", r
	}
	if c.Agent == "" && parent != nil {
		return parent.Agent, nil
	}
	return c.Agent, nil
}

// ModelAgents are the agents whose model a Worker runs (none when it runs
// no model; the default agent when it lists none).
func ModelAgents(w *fsmpb.WorkerInfo) []string {
	if !w.GetRunsModel() {
		return nil
	}
	if len(w.Agents) == 0 {
		return []string{""}
	}
	return w.Agents
}

// ServesAgent reports whether a tool registration serves an agent (no
// agents listed: every agent).
func ServesAgent(agents []string, agent string) bool {
	return len(agents) == 0 || slices.Contains(agents, agent)
}

// ModelServers returns the ids of the live Workers that run an agent's
// model, in id order (index read).
func (s *State) ModelServers(agent string) []string {
	var ids []string
	for w := range s.tx.ModelWorkers(agent) {
		ids = append(ids, w.Id)
	}
	return ids
}

// ToolServersFor returns the ids of the live Workers serving a tool for an
// agent, in id order (a read of the tool's rows).
func (s *State) ToolServersFor(tool, agent string) []string {
	var ids []string
	for wt := range s.tx.ToolRows(tool) {
		if ServesAgent(wt.Agents, agent) {
			ids = append(ids, wt.WorkerId)
		}
	}
	return ids
}

// StepServers returns the live Workers that may run a dispatched Step: for a
// model Step those running its agent's model, for a tool Step those serving
// its tool for its agent (nil for a wait).
func (s *State) StepServers(st *fsmpb.Step) []string {
	switch Kind(st.Kind).Runner {
	case RunsOnModel:
		return s.ModelServers(st.Agent)
	case RunsOnTool:
		return s.ToolServersFor(st.Tool, st.Agent)
	}
	return nil
}

// WaitingReason says why a queued dispatched Step is not handed out ("" when
// a live Worker serves it, or it is not queued).
func (s *State) WaitingReason(st *fsmpb.Step) string {
	if st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED || !Kind(st.Kind).Dispatched() || len(s.StepServers(st)) > 0 {
		return ""
	}
	return unservedReason(st, len(s.ToolServers(st.Tool)) > 0)
}

// unservedReason names what no live Worker serves for a Step: its agent's
// model, its tool for its agent, or its tool at all.
func unservedReason(st *fsmpb.Step, toolServed bool) string {
	switch {
	case Kind(st.Kind).Runner == RunsOnModel:
		return fmt.Sprintf("no live Worker serves %s (its model)", AgentName(st.Agent))
	case toolServed:
		return fmt.Sprintf("no live Worker serves tool %q for %s", st.Tool, AgentName(st.Agent))
	}
	return fmt.Sprintf("no live Worker serves tool %q", st.Tool)
}

// QueuedStepsFor returns the queued Steps of one ready queue: the model
// Steps of an agent (model set) or one tool's Steps of an agent (index read).
func (s *State) QueuedStepsFor(model bool, tool, agent string) []*fsmpb.Step {
	var out []*fsmpb.Step
	for st := range s.tx.QueueSteps(model, tool, agent) {
		out = append(out, st)
	}
	return out
}
