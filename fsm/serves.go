package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// checkWorkerServes refuses to start a Step's attempt on a registered Worker
// that does not serve it: for a model Step, one that does not run its
// agent's model; for a tool Step, one that does not serve its tool for its
// agent. The broker routes by the same rule; this keeps a broker bug from
// handing one agent's session to another agent's Worker. Two row reads.
func (a *applier) checkWorkerServes(st *fsmpb.Step, workerID string) *Rejection {
	runner := Kind(st.Kind).Runner
	if runner != RunsOnModel && runner != RunsOnTool {
		return nil
	}
	w := a.tx.Worker(workerID)
	if w == nil {
		return nil // a Worker id with no row (commands of old logs, tests): routed by the broker alone
	}
	if runner == RunsOnModel {
		for _, ag := range ModelAgents(w) {
			if ag == st.Agent {
				return nil
			}
		}
		if !w.RunsModel {
			return reject(CodeFailedPrecondition, "worker %q runs no model: it cannot take step %s (the model of %s)", workerID, st.Id, AgentName(st.Agent))
		}
		return reject(CodeFailedPrecondition, "worker %q does not run the model of %s (it serves %s): it cannot take step %s", workerID, AgentName(st.Agent), agentList(ModelAgents(w)), st.Id)
	}
	wt := a.tx.WorkerTool(st.Tool, workerID)
	if wt == nil {
		return reject(CodeFailedPrecondition, "worker %q does not serve tool %q: it cannot take step %s", workerID, st.Tool, st.Id)
	}
	if !ServesAgent(wt.Agents, st.Agent) {
		return reject(CodeFailedPrecondition, "worker %q serves tool %q only for %s, not for %s: it cannot take step %s", workerID, st.Tool, agentList(wt.Agents), AgentName(st.Agent), st.Id)
	}
	return nil
}

// agentList names agents for people: "agent \"a\", agent \"b\"".
func agentList(agents []string) string {
	out := ""
	for i, ag := range agents {
		if i > 0 {
			out += ", "
		}
		out += AgentName(ag)
	}
	return out
}
