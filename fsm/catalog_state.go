package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Tool returns a tool of the catalog (its policy) or nil when no live Worker
// serves it.
func (s *State) Tool(name string) *fsmpb.ToolSpec {
	return s.tx.Tool(name)
}

// Tools returns the catalog in name order.
func (s *State) Tools() []*fsmpb.ToolSpec {
	return store.All[*fsmpb.ToolSpec](s.tx, store.TableTools, store.IndexID)
}

// ToolServers returns the ids of the live Workers serving a tool, in id order.
func (s *State) ToolServers(name string) []string {
	var ids []string
	for wt := range s.tx.ToolRows(name) {
		ids = append(ids, wt.WorkerId)
	}
	return ids
}

// Worker returns a registered Worker or nil.
func (s *State) Worker(id string) *fsmpb.WorkerInfo {
	return s.tx.Worker(id)
}

// WorkersWatch returns the registered Workers and a channel closed when the
// Workers table changes.
func (s *State) WorkersWatch() ([]*fsmpb.WorkerInfo, <-chan struct{}) {
	return store.TableWatch[*fsmpb.WorkerInfo](s.tx, store.TableWorkers)
}

// QueuedStepsOfTool returns the queued Steps of a tool (index read).
func (s *State) QueuedStepsOfTool(tool string) []*fsmpb.Step {
	var out []*fsmpb.Step
	for st := range s.tx.ToolQueueSteps(tool) {
		out = append(out, st)
	}
	return out
}
