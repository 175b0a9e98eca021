package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// defaultAgentLabel is how the listing names the default agent ("").
const defaultAgentLabel = "(default)"

type workerJSON struct {
	ID        string `json:"id"`
	RunsModel bool   `json:"runs_model"`
	// The agents whose model it runs; [""] is the default agent.
	Agents        []string         `json:"agents"`
	Tools         []workerToolJSON `json:"tools"`
	LastContactMs int64            `json:"last_contact_ms,omitempty"`
	OpenPolls     uint32           `json:"open_polls"`
	Healthy       bool             `json:"healthy"`
}

type workerToolJSON struct {
	Name string `json:"name"`
	// The agents it serves the tool for; empty: every agent.
	Agents []string `json:"agents"`
}

func newWorkersCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the registered Workers: the agents whose model each runs and the tools it serves (for which agents)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *dexv1.ListWorkersResponse
			err := g.leader(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
				r, err := c.ListWorkers(ctx, &dexv1.ListWorkersRequest{})
				resp = r
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printWorkersJSON(cmd.OutOrStdout(), resp)
			}
			printWorkers(cmd.OutOrStdout(), resp, time.Now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// modelAgents are the agents whose model a Worker runs, as fsm.ModelAgents.
func modelAgents(w *dexv1.WorkerInfo) []string {
	if !w.GetRunsModel() {
		return []string{}
	}
	if len(w.Agents) == 0 {
		return []string{""}
	}
	return w.Agents
}

func agentLabels(agents []string) string {
	out := make([]string, len(agents))
	for i, ag := range agents {
		out[i] = ag
		if ag == "" {
			out[i] = defaultAgentLabel
		}
	}
	return strings.Join(out, ",")
}

// toolLabels names a Worker's tools, each served for some agents with them
// in brackets: "search[bot@1],fetch".
func toolLabels(tools []*dexv1.ToolSpec) string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
		if len(t.Agents) > 0 {
			out[i] += "[" + strings.Join(t.Agents, ",") + "]"
		}
	}
	return strings.Join(out, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printWorkers(w io.Writer, r *dexv1.ListWorkersResponse, now time.Time) {
	if len(r.Workers) == 0 {
		fmt.Fprintln(w, "No Worker is registered.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tMODEL OF AGENTS\tTOOLS [ONLY FOR AGENTS]\tOPEN POLLS\tLAST CONTACT\tHEALTH")
	for _, ws := range r.Workers {
		info := ws.GetWorker()
		contact := "-"
		if ws.LastContactMs > 0 {
			contact = now.Sub(time.UnixMilli(ws.LastContactMs)).Truncate(time.Second).String() + " ago"
		}
		health := "healthy"
		if ws.GetHealth().GetUnhealthy() {
			health = "unhealthy"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", info.GetId(), orDash(agentLabels(modelAgents(info))), orDash(toolLabels(info.GetTools())), ws.OpenPolls, contact, health)
	}
	tw.Flush()
	if !r.Leader {
		fmt.Fprintf(w, "(answered by %s, not the leader: open polls, contacts and health are the leader's)\n", r.AnsweredBy)
	}
}

func printWorkersJSON(w io.Writer, r *dexv1.ListWorkersResponse) error {
	out := []workerJSON{}
	for _, ws := range r.Workers {
		info := ws.GetWorker()
		wj := workerJSON{ID: info.GetId(), RunsModel: info.GetRunsModel(), Agents: modelAgents(info), Tools: []workerToolJSON{},
			LastContactMs: ws.LastContactMs, OpenPolls: ws.OpenPolls, Healthy: !ws.GetHealth().GetUnhealthy()}
		for _, t := range info.GetTools() {
			agents := t.Agents
			if agents == nil {
				agents = []string{}
			}
			wj.Tools = append(wj.Tools, workerToolJSON{Name: t.Name, Agents: agents})
		}
		out = append(out, wj)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
