package fsm

import (
	"cmp"
	"slices"

	memdb "github.com/hashicorp/go-memdb"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// State is a consistent read-only view of the replicated state. Objects it
// returns are shared with the store: callers must not modify them.
type State struct {
	tx *memdb.Txn
}

// Meta returns the cluster-wide counters (epoch, applied index…).
func (s *State) Meta() *dexv1.ClusterMeta {
	raw, err := s.tx.First(tableMeta, indexID, metaID)
	if err != nil || raw == nil {
		return &dexv1.ClusterMeta{Id: metaID}
	}
	return raw.(*dexv1.ClusterMeta)
}

// Session returns a session or nil.
func (s *State) Session(id string) *dexv1.Session {
	raw, err := s.tx.First(tableSessions, indexID, id)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*dexv1.Session)
}

// Sessions returns every session in id order.
func (s *State) Sessions() []*dexv1.Session { return all[*dexv1.Session](s.tx, tableSessions, indexID) }

// Step returns a Step or nil.
func (s *State) Step(id string) *dexv1.Step {
	raw, err := s.tx.First(tableSteps, indexID, id)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*dexv1.Step)
}

// Steps returns the Steps of a session in creation order.
func (s *State) Steps(sessionID string) []*dexv1.Step {
	it, err := s.tx.Get(tableSteps, indexSession, sessionID)
	if err != nil {
		return nil
	}
	var out []*dexv1.Step
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*dexv1.Step))
	}
	sortSteps(out)
	return out
}

// StepsWithStatus returns the Steps in a status (queued, running, waiting).
func (s *State) StepsWithStatus(st dexv1.StepStatus) []*dexv1.Step {
	it, err := s.tx.Get(tableSteps, indexStatus, st)
	if err != nil {
		return nil
	}
	var out []*dexv1.Step
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*dexv1.Step))
	}
	return out
}

// Nodes returns the known node addresses in id order.
func (s *State) Nodes() []*dexv1.NodeInfo { return all[*dexv1.NodeInfo](s.tx, tableNodes, indexID) }

// Workers returns the registered Workers in id order.
func (s *State) Workers() []*dexv1.WorkerInfo {
	return all[*dexv1.WorkerInfo](s.tx, tableWorkers, indexID)
}

// WatchSet returns a watch that fires on the next applied entry.
func (s *State) WatchSet() memdb.WatchSet {
	ws := memdb.NewWatchSet()
	if ch, _, err := s.tx.FirstWatch(tableMeta, indexID, metaID); err == nil {
		ws.Add(ch)
	}
	return ws
}

func all[T any](tx *memdb.Txn, table, index string) []T {
	it, err := tx.Get(table, index)
	if err != nil {
		return nil
	}
	var out []T
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(T))
	}
	return out
}

// sortSteps orders Steps by their number within the session.
func sortSteps(steps []*dexv1.Step) {
	slices.SortFunc(steps, func(a, b *dexv1.Step) int { return cmp.Compare(a.Number, b.Number) })
}
