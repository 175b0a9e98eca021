package server

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// stateSize is this node's replicated state by table, as Apply keeps it,
// and its newest snapshot on disk.
func (a *Admin) stateSize() *dexv1.StateSize {
	st := a.node.State()
	out := &dexv1.StateSize{AppliedIndex: st.Meta().GetAppliedIndex()}
	for _, t := range st.TableSizes() {
		out.Tables = append(out.Tables, &dexv1.TableSize{Table: t.Table, Rows: uint64(t.Rows), Bytes: uint64(t.Bytes)})
		out.TotalRows += uint64(t.Rows)
		out.TotalBytes += uint64(t.Bytes)
	}
	if size, index, ok := a.node.LastSnapshot(); ok {
		out.LastSnapshotBytes, out.LastSnapshotIndex = uint64(size), index
	}
	return out
}
