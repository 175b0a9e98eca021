package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// LedgerEntry is one line of an execution ledger (docs/ledger.md): written
// by a Worker library when $DEX_LEDGER is set, or by the demo Worker's
// --ledger (whose lines have no phase: each is a handler start).
type LedgerEntry struct {
	Session        string `json:"session"`
	CallID         string `json:"call_id"`
	Tool           string `json:"tool"`
	Attempt        uint32 `json:"attempt"`
	IdempotencyKey string `json:"idempotency_key"`
	PID            int    `json:"pid"`
	Time           string `json:"time"`
	Step           string `json:"step"`
	Kind           string `json:"kind"`
	TaskID         string `json:"task_id"`
	Worker         string `json:"worker"`
	// Epoch: the dispatch epoch the Worker's task carried (0: not recorded).
	Epoch uint64 `json:"epoch,omitempty"`
	// Phase: start, end or effect ("": a demo Worker line, a start).
	Phase string `json:"phase,omitempty"`
	// Outcome of an end line: ok, error or cancelled.
	Outcome string `json:"outcome,omitempty"`
	// Effect and EffectKey: the side effect a tool reported and the
	// idempotency key it used ("": none).
	Effect    string `json:"effect,omitempty"`
	EffectKey string `json:"effect_key,omitempty"`
}

// IsStart says whether e records a handler start.
func (e LedgerEntry) IsStart() bool { return e.Phase == "start" || e.Phase == "" }

// IsEffect says whether e records a side effect a tool reported.
func (e LedgerEntry) IsEffect() bool { return e.Phase == "effect" }

// ReadLedger reads every complete line of a ledger; a missing file is empty.
// A last line without its newline (its writer was killed while writing it)
// is left out.
func ReadLedger(path string) ([]LedgerEntry, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []LedgerEntry
	r := bufio.NewReaderSize(f, 1<<16)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return out, nil // a partial last line, or none
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e LedgerEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("ledger %s line %d: %v", path, n, err)
		}
		out = append(out, e)
	}
}

// Executions counts the executions of a session that match f: the lines
// that count (see counted), so a start and its end line count once.
func Executions(entries []LedgerEntry, session string, f func(LedgerEntry) bool) int {
	n := 0
	counted(entries, func(e LedgerEntry) {
		if e.Session == session && f(e) {
			n++
		}
	})
	return n
}

// StepTool names what ran: a Step and its tool ("" for a model call).
type StepTool struct{ Step, Tool string }

// effectTools are the tools that reported a side effect anywhere in
// entries: they are counted by their effects, not by their handler runs.
func effectTools(entries []LedgerEntry) map[string]bool {
	m := map[string]bool{}
	for _, e := range entries {
		if e.IsEffect() {
			m[e.Tool] = true
		}
	}
	return m
}

// counted calls f with every line that counts as one execution: a side
// effect of a tool that reports them, else a handler start.
func counted(entries []LedgerEntry, f func(e LedgerEntry)) {
	byEffect := effectTools(entries)
	for _, e := range entries {
		if byEffect[e.Tool] && e.Tool != "" {
			if e.IsEffect() {
				f(e)
			}
		} else if e.IsStart() {
			f(e)
		}
	}
}

// ExecutionsByStepTool counts the executions of every Step and tool.
func ExecutionsByStepTool(entries []LedgerEntry) map[StepTool]int {
	out := map[StepTool]int{}
	counted(entries, func(e LedgerEntry) { out[StepTool{e.Step, e.Tool}]++ })
	return out
}

// ExecutionsByKey counts the tool executions (Step kind tool) by the
// idempotency key they ran with: the key a reported side effect names, or
// else the key the cluster handed the handler ("" for a read).
func ExecutionsByKey(entries []LedgerEntry) map[string]int {
	out := map[string]int{}
	counted(entries, func(e LedgerEntry) {
		switch {
		case e.IsEffect():
			out[e.EffectKey]++
		case e.Kind == "tool":
			out[e.IdempotencyKey]++
		}
	})
	return out
}
