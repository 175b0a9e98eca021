package fsm

import (
	"fmt"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Table names of the state store; their indexes and snapshot records are
// registered in stateTables (tables.go).
const (
	tableSessions = "sessions"
	tableSteps    = "steps"
	tableWorkers  = "workers"
	tableNodes    = "nodes"
	tableEvents   = "events"
	tableMeta     = "meta"
	// A session's history entries, inbox messages and accepted message ids
	// are rows of their own keyed (session, seq) or (session, message id), so
	// a command on a long session touches a bounded number of rows.
	tableHistory  = "history"
	tableInbox    = "inbox"
	tableAccepted = "accepted"
)

// Index names.
const (
	indexID     = "id"
	indexStatus = "status"
	// Steps by (session, number): a session's Steps in order, for paging.
	// It is the Steps' id index (a Step id names its session and number).
	indexSessionNumber = indexID
)

const metaID = "meta"

// liveStepIndexer indexes the Steps still in play (queued, running,
// waiting) by status, and a queued dispatched Step also by its ready queue
// (runner, tool, agent) after its status: one index serves "the running
// Steps" and "the queue of tool t for agent a", and a Step that starts moves
// one key. A finished Step leaves it, so long sessions cost it nothing.
type liveStepIndexer struct{}

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

func (liveStepIndexer) FromObject(obj any) (bool, []byte, error) {
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
	switch Kind(st.Kind).Runner {
	case RunsOnModel:
		return true, append(key, queueIndexKey(true, "", st.Agent)...), nil
	case RunsOnTool:
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
