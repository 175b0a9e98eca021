package store

import (
	"fmt"

	"github.com/dexhq/dex/fsm/store/internal/cowdb"
)

// TableSize is what one table of the state holds: its rows and their
// encoded bytes, kept up to date on every write (each write adds the new
// row's encoded size and takes off the old one's), so reading them costs
// nothing. Both depend only on the rows there, so every node, and a node
// restored from a snapshot, has the same figures for the same state.
type TableSize struct {
	Table string
	// Rows counts records as a snapshot carries them: an event page
	// counts its events.
	Rows int64
	// Bytes is the rows' encoded size: a row's protobuf encoding, an
	// event's encoding without its session id (the page's).
	Bytes int64
}

// sizedRow is a row the generated code measures.
type sizedRow interface{ SizeVT() int }

// rowSize is the engine's measure of a row of the state.
func rowSize(table string, row any) cowdb.Size {
	switch r := row.(type) {
	case *EventPage:
		return cowdb.Size{Bytes: int64(len(r.data)), Items: int64(r.n)}
	case sizedRow:
		return cowdb.Size{Bytes: int64(r.SizeVT()), Items: 1}
	}
	panic(fmt.Sprintf("store: a row of %s (%T) has no size", table, row))
}

// TableSizes returns every table's size, in the order a snapshot writes
// the tables.
func (t *Txn) TableSizes() []TableSize {
	out := make([]TableSize, len(registry))
	for i := range registry {
		s := t.mem().Size(registry[i].name)
		out[i] = TableSize{Table: registry[i].name, Rows: s.Items, Bytes: s.Bytes}
	}
	return out
}

// RecountSizes walks every row of every table and measures it: what
// TableSizes keeps without the walk, for checks that it still agrees.
// It costs O(rows): never call it on a hot path.
func (t *Txn) RecountSizes() []TableSize {
	out := make([]TableSize, len(registry))
	for i := range registry {
		out[i].Table = registry[i].name
		it, err := t.get(registry[i].name, IndexID)
		if err != nil {
			panic(fmt.Sprintf("store: read %s: %v", registry[i].name, err))
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			s := rowSize(registry[i].name, raw)
			out[i].Rows += s.Items
			out[i].Bytes += s.Bytes
		}
	}
	return out
}
