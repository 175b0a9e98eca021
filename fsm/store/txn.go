package store

import (
	"fmt"

	memdb "github.com/hashicorp/go-memdb"
)

// Txn is a transaction on the store. Rows it returns are shared with the
// store and with readers: a caller clones one before it changes it.
type Txn struct {
	tx *memdb.Txn
}

// iterator walks the rows of an index in order.
type iterator interface {
	// Next returns the next row, nil after the last.
	Next() any
	// WatchCh is closed when the rows the iterator covers change.
	WatchCh() <-chan struct{}
}

// Commit makes a write transaction's changes visible.
func (t *Txn) Commit() { t.tx.Commit() }

// Abort drops a write transaction's changes; after a Commit it does nothing.
func (t *Txn) Abort() { t.tx.Abort() }

// insert and get are the raw access the snapshot codec uses: it returns
// errors (a damaged snapshot) where the typed access panics.
func (t *Txn) insert(table string, row any) error { return t.tx.Insert(table, row) }

func (t *Txn) get(table, index string, args ...any) (iterator, error) {
	return t.tx.Get(table, index, args...)
}

// Put writes a row; an error is a schema bug, so it panics.
func (t *Txn) Put(table string, row any) {
	if err := t.tx.Insert(table, row); err != nil {
		panic(fmt.Sprintf("store: insert %s: %v", table, err))
	}
}

// Remove deletes a row; an error (a row not there, a schema bug) panics.
func (t *Txn) Remove(table string, row any) {
	if err := t.tx.Delete(table, row); err != nil {
		panic(fmt.Sprintf("store: delete %s: %v", table, err))
	}
}

// All returns the rows of a table's index in order.
func All[T any](t *Txn, table, index string) []T {
	it, err := t.tx.Get(table, index)
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
func (t *Txn) Count(table string) int {
	it, err := t.tx.Get(table, IndexID)
	if err != nil {
		return 0
	}
	n := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		n++
	}
	return n
}
