package store

import (
	"fmt"

	"github.com/dexhq/dex/fsm/store/internal/cowdb"
)

// Txn is a transaction on the store. Rows it returns are shared with the
// store and with readers: a caller clones one before it changes it.
//
// It is the engine's transaction under another name, so wrapping one costs
// nothing.
type Txn cowdb.Txn

func (t *Txn) mem() *cowdb.Txn { return (*cowdb.Txn)(t) }

// iterator walks the rows of an index in order.
type iterator interface {
	// Next returns the next row, nil after the last.
	Next() any
	// WatchCh is closed when the rows the iterator covers change.
	WatchCh() <-chan struct{}
}

// Commit makes a write transaction's changes visible.
func (t *Txn) Commit() { t.mem().Commit() }

// Abort drops a write transaction's changes; after a Commit it does nothing.
func (t *Txn) Abort() { t.mem().Abort() }

// insert and get are the raw access the snapshot codec uses: it returns
// errors (a damaged snapshot) where the typed access panics.
func (t *Txn) insert(table string, row any) error { return t.mem().Insert(table, row) }

func (t *Txn) get(table, index string, args ...any) (iterator, error) {
	return t.mem().Get(table, index, args...)
}

// Put writes a row; an error is a schema bug, so it panics.
func (t *Txn) Put(table string, row any) {
	if err := t.mem().Insert(table, row); err != nil {
		panic(fmt.Sprintf("store: insert %s: %v", table, err))
	}
}

// Remove deletes a row; an error (a row not there, a schema bug) panics.
func (t *Txn) Remove(table string, row any) {
	if err := t.mem().Delete(table, row); err != nil {
		panic(fmt.Sprintf("store: delete %s: %v", table, err))
	}
}

// All returns the rows of a table's index in order.
func All[T any](t *Txn, table, index string) []T {
	it, err := t.mem().Get(table, index)
	if err != nil {
		return nil
	}
	var out []T
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(T))
	}
	return out
}

// Count returns how many rows a table holds.
func (t *Txn) Count(table string) int { return t.mem().Len(table) }
