package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Tool returns a tool of the catalog (its policy) or nil when no live Worker
// serves it.
func (s *State) Tool(name string) *fsmpb.ToolSpec {
	raw, err := s.tx.First(store.TableTools, store.IndexID, name)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*fsmpb.ToolSpec)
}

// Tools returns the catalog in name order.
func (s *State) Tools() []*fsmpb.ToolSpec {
	return store.All[*fsmpb.ToolSpec](s.tx, store.TableTools, store.IndexID)
}

// ToolServers returns the ids of the live Workers serving a tool, in id order.
func (s *State) ToolServers(name string) []string {
	it, err := s.tx.Get(store.TableWorkerTools, store.IndexTool, name)
	if err != nil {
		return nil
	}
	var ids []string
	for raw := it.Next(); raw != nil; raw = it.Next() {
		ids = append(ids, raw.(*fsmpb.WorkerTool).WorkerId)
	}
	return ids
}

// Worker returns a registered Worker or nil.
func (s *State) Worker(id string) *fsmpb.WorkerInfo {
	raw, err := s.tx.First(store.TableWorkers, store.IndexID, id)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*fsmpb.WorkerInfo)
}

// WorkersWatch returns the registered Workers and a channel closed when the
// Workers table changes.
func (s *State) WorkersWatch() ([]*fsmpb.WorkerInfo, <-chan struct{}) {
	it, err := s.tx.Get(store.TableWorkers, store.IndexID)
	if err != nil {
		return nil, nil
	}
	var out []*fsmpb.WorkerInfo
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*fsmpb.WorkerInfo))
	}
	return out, it.WatchCh()
}

// QueuedStepsOfTool returns the queued Steps of a tool (index read).
func (s *State) QueuedStepsOfTool(tool string) []*fsmpb.Step {
	it, err := s.tx.Get(store.TableSteps, store.IndexQueue+"_prefix", false, tool)
	if err != nil {
		return nil
	}
	var out []*fsmpb.Step
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*fsmpb.Step))
	}
	return out
}
