package store

import (
	"fmt"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Routing is what the rules say about where a row is found, for the indexes
// keyed by it: the store keeps the keys, the rules decide who runs a Step and
// which agents a Worker serves. Every DB is opened with the same Routing.
type Routing struct {
	// StepQueue is the kind of ready queue a queued Step of a kind waits in.
	StepQueue func(fsmpb.StepKind) Queue
	// ModelAgents are the agents whose model a Worker runs.
	ModelAgents func(*fsmpb.WorkerInfo) []string
}

// Queue is the kind of ready queue a queued Step waits in.
type Queue int

const (
	// NoQueue: no Worker runs the Step (a wait).
	NoQueue Queue = iota
	// ModelQueue: a Worker that runs the model, per agent.
	ModelQueue
	// ToolQueue: a Worker that serves the Step's tool, per agent.
	ToolQueue
)

// liveStepIndexer indexes the Steps still in play (queued, running,
// waiting) by status, and a queued dispatched Step also by its ready queue
// (runner, tool, agent) after its status: one index serves "the running
// Steps" and "the queue of tool t for agent a", and a Step that starts moves
// one key. A finished Step leaves it, so long sessions cost it nothing.
type liveStepIndexer struct {
	queue func(fsmpb.StepKind) Queue
}

// notDispatched marks a queued Step that no Worker runs, so its key never
// reads as a ready queue's.
const notDispatched = 'n'

func liveStatus(s fsmpb.StepStatus) bool {
	switch s {
	case fsmpb.StepStatus_STEP_STATUS_QUEUED, fsmpb.StepStatus_STEP_STATUS_RUNNING, fsmpb.StepStatus_STEP_STATUS_WAITING:
		return true
	}
	return false
}

func (x liveStepIndexer) FromObject(obj any) (bool, []byte, error) {
	st, ok := obj.(*fsmpb.Step)
	if !ok {
		return false, nil, fmt.Errorf("live step index: %T is not a Step", obj)
	}
	if !liveStatus(st.Status) {
		return false, nil, nil
	}
	key := []byte{byte(st.Status)}
	if st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		return true, key, nil
	}
	switch x.queue(st.Kind) {
	case ModelQueue:
		return true, append(key, queueIndexKey(true, "", st.Agent)...), nil
	case ToolQueue:
		return true, append(key, queueIndexKey(false, st.Tool, st.Agent)...), nil
	}
	return true, append(key, notDispatched), nil
}

// FromArgs takes a status (every live Step in it) or (model, tool, agent)
// (one ready queue).
func (liveStepIndexer) FromArgs(args ...any) ([]byte, error) {
	switch len(args) {
	case 1:
		st, ok := args[0].(fsmpb.StepStatus)
		if !ok {
			return nil, fmt.Errorf("live step index: a status argument must be a StepStatus, got %T", args[0])
		}
		if !liveStatus(st) {
			return nil, fmt.Errorf("live step index holds queued, running and waiting Steps, not %s", st)
		}
		return []byte{byte(st)}, nil
	case 3:
		model, ok1 := args[0].(bool)
		tool, ok2 := args[1].(string)
		agent, ok3 := args[2].(string)
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("live step index: queue arguments must be (bool, string, string), got (%T, %T, %T)", args[0], args[1], args[2])
		}
		return append([]byte{byte(fsmpb.StepStatus_STEP_STATUS_QUEUED)}, queueIndexKey(model, tool, agent)...), nil
	}
	return nil, fmt.Errorf("live step index takes a status or (model, tool, agent), got %d arguments", len(args))
}

// PrefixFromArgs takes (model, tool): every agent's queue of a tool.
func (liveStepIndexer) PrefixFromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("live step index prefix takes (model, tool), got %d arguments", len(args))
	}
	model, ok1 := args[0].(bool)
	tool, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("live step index prefix arguments must be (bool, string), got (%T, %T)", args[0], args[1])
	}
	k := queueIndexKey(model, tool, "")
	return append([]byte{byte(fsmpb.StepStatus_STEP_STATUS_QUEUED)}, k[:len(k)-1]...), nil
}

// queueIndexKey is a ready queue's part of a queued dispatched Step's key in
// the live Steps index: runner, tool, agent.
func queueIndexKey(model bool, tool, agent string) []byte {
	runner := byte('t')
	if model {
		runner = 'm'
	}
	return append([]byte{runner}, tool+"\x00"+agent+"\x00"...)
}

// modelAgentIndexer indexes a Worker under each agent whose model it runs.
type modelAgentIndexer struct {
	agents func(*fsmpb.WorkerInfo) []string
}

func (x modelAgentIndexer) FromObject(obj any) (bool, [][]byte, error) {
	w, ok := obj.(*fsmpb.WorkerInfo)
	if !ok {
		return false, nil, fmt.Errorf("model agent index: %T is not a WorkerInfo", obj)
	}
	agents := x.agents(w)
	keys := make([][]byte, 0, len(agents))
	for _, ag := range agents {
		keys = append(keys, []byte(ag+"\x00"))
	}
	return len(keys) > 0, keys, nil
}

func (modelAgentIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("model agent index takes one argument, got %d", len(args))
	}
	ag, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("model agent index argument must be a string, got %T", args[0])
	}
	return []byte(ag + "\x00"), nil
}

// InTurn reports whether a session's status is one of a turn under way:
// such a session is not in the index of sessions at rest.
func InTurn(st fsmpb.SessionStatus) bool {
	return st == fsmpb.SessionStatus_SESSION_STATUS_RUNNING || st == fsmpb.SessionStatus_SESSION_STATUS_WAITING
}

type restingSessionIndexer struct{}

func restingKey(st fsmpb.SessionStatus, updatedAtMs int64) []byte {
	return append([]byte{byte(st)}, dueKey(updatedAtMs)...)
}

func (restingSessionIndexer) FromObject(obj any) (bool, []byte, error) {
	s, ok := obj.(*fsmpb.Session)
	if !ok {
		return false, nil, fmt.Errorf("session status index: %T is not a Session", obj)
	}
	if InTurn(s.Status) {
		return false, nil, nil
	}
	return true, restingKey(s.Status, s.UpdatedAtMs), nil
}

func (restingSessionIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("session status index takes (status, updated_at_ms), got %d arguments", len(args))
	}
	st, ok1 := args[0].(fsmpb.SessionStatus)
	at, ok2 := args[1].(int64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("session status index takes (SessionStatus, int64), got (%T, %T)", args[0], args[1])
	}
	if InTurn(st) {
		return nil, fmt.Errorf("session status index holds sessions at rest, not %s ones", st)
	}
	return restingKey(st, at), nil
}
