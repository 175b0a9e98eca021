package client

import (
	"errors"
	"fmt"

	"github.com/dexhq/dex/api/wirerules"
)

// checkAgents refuses agent lists the cluster would refuse, before the
// Worker starts: a bad or repeated name, or agents without a model.
func checkAgents(opts WorkerOptions) error {
	if len(opts.Agents) > 0 && opts.Model == nil {
		return errors.New("agents are listed but the Worker runs no model: list a tool's agents in its Spec.Agents")
	}
	if err := checkAgentList("worker agents", opts.Agents); err != nil {
		return err
	}
	for _, t := range opts.Tools {
		if err := checkAgentList(fmt.Sprintf("tool %q agents", t.Spec.GetName()), t.Spec.GetAgents()); err != nil {
			return err
		}
	}
	return nil
}

func checkAgentList(what string, agents []string) error {
	seen := map[string]bool{}
	for _, ag := range agents {
		if ag == "" {
			return fmt.Errorf("%s: an empty agent name (list none for the default agent)", what)
		}
		if err := wirerules.CheckAgent(ag); err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		if seen[ag] {
			return fmt.Errorf("%s: agent %q is listed twice", what, ag)
		}
		seen[ag] = true
	}
	return nil
}
