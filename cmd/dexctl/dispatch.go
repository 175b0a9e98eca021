package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
)

// dispatchFlags are session start's dispatch order: each one given
// replaces the parent's (or the default).
type dispatchFlags struct {
	priority, weight int
	key              string
}

func (d *dispatchFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&d.priority, "priority", 0, fmt.Sprintf("dispatch priority, 1 (lowest) to %d (default: the parent's, else %d)", fsm.MaxPriority, fsm.DefaultPriority))
	cmd.Flags().StringVar(&d.key, "fairness-key", "", fmt.Sprintf("share dispatch within a priority by this key, at most %d bytes (default: the parent's, else none)", fsm.MaxFairnessKey))
	cmd.Flags().IntVar(&d.weight, "fairness-weight", 0, fmt.Sprintf("the key's share, 1 to %d (default: the parent's, else 1)", fsm.MaxFairnessWeight))
}

// apply checks the flags given and sets them on req.
func (d *dispatchFlags) apply(cmd *cobra.Command, req *dexv1.CreateSessionRequest) error {
	if cmd.Flags().Changed("priority") && (d.priority < 1 || d.priority > fsm.MaxPriority) {
		return usagef("--priority must be between 1 and %d, not %d", fsm.MaxPriority, d.priority)
	}
	if cmd.Flags().Changed("fairness-weight") && (d.weight < 1 || d.weight > fsm.MaxFairnessWeight) {
		return usagef("--fairness-weight must be between 1 and %d, not %d", fsm.MaxFairnessWeight, d.weight)
	}
	if len(d.key) > fsm.MaxFairnessKey {
		return usagef("--fairness-key is %d bytes; at most %d", len(d.key), fsm.MaxFairnessKey)
	}
	req.Priority, req.FairnessKey, req.FairnessWeight = uint32(d.priority), d.key, uint32(d.weight)
	return nil
}

// dispatchJSON is a session's dispatch order, its defaults filled in, and
// its provider.
type dispatchJSON struct {
	Priority       uint32 `json:"priority"`
	FairnessKey    string `json:"fairness_key,omitempty"`
	FairnessWeight uint32 `json:"fairness_weight"`
	Provider       string `json:"provider,omitempty"`
}

func toDispatchJSON(s *dexv1.Session) dispatchJSON {
	return dispatchJSON{Priority: orDefault(s.Priority, fsm.DefaultPriority), FairnessKey: s.FairnessKey,
		FairnessWeight: orDefault(s.FairnessWeight, 1), Provider: s.Provider}
}

func orDefault(v, def uint32) uint32 {
	if v == 0 {
		return def
	}
	return v
}

// printDispatch prints a session's dispatch order and provider.
func printDispatch(w io.Writer, d dispatchJSON) {
	fmt.Fprintf(w, "dispatch: priority %d", d.Priority)
	if d.FairnessKey != "" {
		fmt.Fprintf(w, ", fairness key %s (weight %d)", safe(d.FairnessKey), d.FairnessWeight)
	} else {
		fmt.Fprint(w, ", no fairness key")
	}
	if d.Provider != "" {
		fmt.Fprintf(w, ", provider %s\n", safe(d.Provider))
	} else {
		fmt.Fprintln(w, ", no provider")
	}
}
