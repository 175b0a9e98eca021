package cowdb

import (
	"bytes"
	"fmt"

	"github.com/tidwall/btree"
)

// Txn is a transaction: a view of one committed version, and for a write
// transaction the trees it changed on top of it.
type Txn struct {
	db      *DB
	write   bool
	scratch bool
	done    bool
	base    *version
	// trees are the write transaction's own copies of the trees it wrote
	// (nil where it wrote none).
	trees []*btree.BTreeG[*entry]
	// grouped are the keys written to indexes watched by group, for the
	// commit to wake their watchers.
	grouped []groupedKey
	pivot   entry
	// writes counts the writes, so an iterator sees the tree change.
	writes uint64
	// changes is Insert's and Delete's scratch space, kept between calls.
	changes []change
	// sizes are the per-table sizes once this transaction changed one (nil
	// before: the base's).
	sizes []Size
}

// change is what one write does to one index: the keys the row has there
// now and had before (a single indexer's key kept in newOne, oldOne).
type change struct {
	ix               *index
	newKeys, oldKeys [][]byte
	newOne, oldOne   [1][]byte
}

type groupedKey struct {
	ix  *index
	key []byte
}

// view is the tree a read of ix sees.
func (t *Txn) view(ix *index) *btree.BTreeG[*entry] {
	if t.trees != nil {
		if bt := t.trees[ix.n]; bt != nil {
			return bt
		}
	}
	return t.base.trees[ix.n].bt
}

// writable is this transaction's own copy of ix's tree.
func (t *Txn) writable(ix *index) *btree.BTreeG[*entry] {
	if bt := t.trees[ix.n]; bt != nil {
		return bt
	}
	t.db.copyMu.Lock()
	bt := t.base.trees[ix.n].bt.Copy()
	t.db.copyMu.Unlock()
	t.trees[ix.n] = bt
	return bt
}

// Commit publishes a write transaction's changes (a scratch one's are
// dropped) and wakes the watchers of what changed. On a read transaction,
// or after Commit or Abort, it does nothing.
func (t *Txn) Commit() {
	if !t.write || t.done {
		return
	}
	t.done = true
	if t.scratch {
		return
	}
	defer t.db.writer.Unlock()
	changed := false
	for _, bt := range t.trees {
		if bt != nil {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	next := &version{trees: make([]*tree, len(t.base.trees)), sizes: t.base.sizes}
	if t.sizes != nil {
		next.sizes = t.sizes
	}
	copy(next.trees, t.base.trees)
	for i, bt := range t.trees {
		if bt != nil {
			next.trees[i] = &tree{bt: bt}
		}
	}
	t.db.current.Store(next)
	for i, bt := range t.trees {
		if bt != nil {
			t.base.trees[i].replaced.fire()
		}
	}
	t.db.watches.wake(t.grouped)
}

// Abort drops a write transaction's changes; after Commit it does nothing.
func (t *Txn) Abort() {
	if !t.write || t.done {
		return
	}
	t.done = true
	if !t.scratch {
		t.db.writer.Unlock()
	}
}

func (t *Txn) get(bt *btree.BTreeG[*entry], key []byte) (*entry, bool) {
	t.pivot.key = key
	e, ok := bt.Get(&t.pivot)
	t.pivot.key = nil
	return e, ok
}

// rowID checks that a write of row to a table can be made here and returns
// the table and the row's id key.
func (t *Txn) rowID(op, tableName string, row any) (*table, []byte, error) {
	if !t.write || t.done {
		return nil, nil, fmt.Errorf("cannot %s in read-only transaction", op)
	}
	tb, ok := t.db.tables[tableName]
	if !ok {
		return nil, nil, fmt.Errorf("invalid table '%s'", tableName)
	}
	ok, id, err := tb.indexes[0].single.FromObject(row)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to build primary index: %v", err)
	}
	if !ok {
		return nil, nil, fmt.Errorf("object missing primary index")
	}
	return tb, id, nil
}

// Insert puts a row, replacing the row with the same id if there is one.
func (t *Txn) Insert(tableName string, row any) error {
	tb, id, err := t.rowID("insert", tableName, row)
	if err != nil {
		return err
	}
	idIx := tb.indexes[0]
	// The new row's keys are checked before anything is written, so a
	// refused row leaves the transaction as it was.
	changes := t.changes[:0]
	defer func() { clear(changes); t.changes = changes[:0] }()
	for _, ix := range tb.indexes[1:] {
		changes = append(changes, change{ix: ix})
		c := &changes[len(changes)-1]
		nk, has, err := ix.keys(row, id, &c.newOne)
		if err != nil {
			return err
		}
		if !has && !ix.allowMissing {
			return fmt.Errorf("missing value for index '%s'", ix.name)
		}
		if has {
			c.newKeys = nk
		}
	}
	// Writing the id entry returns the row it replaces: one descent for
	// both. The old row's keys were built when it was written, by the same
	// indexers, so building them again cannot fail.
	old, replaced := t.set(idIx, id, row)
	if t.db.rowSize != nil {
		delta := t.db.rowSize(tableName, row)
		if replaced {
			delta = delta.minus(t.db.rowSize(tableName, old.row))
		}
		t.addSize(tb, delta)
	}
	for i := range changes {
		c := &changes[i]
		if replaced {
			if ok, hasOld, err := c.ix.keys(old.row, id, &c.oldOne); err != nil {
				panic(fmt.Sprintf("cowdb: the stored row of %s no longer indexes: %v", tableName, err))
			} else if hasOld {
				c.oldKeys = ok
			}
		}
		for _, k := range c.oldKeys {
			if !containsKey(c.newKeys, k) {
				t.del(c.ix, k)
			}
		}
		for _, k := range c.newKeys {
			if c.ix.idOf != nil && containsKey(c.oldKeys, k) {
				continue // its entry names the row by key, and the key is there
			}
			t.set(c.ix, k, row)
		}
	}
	return nil
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

// set puts key's entry and returns the one it replaced, if any.
func (t *Txn) set(ix *index, key []byte, row any) (*entry, bool) {
	t.writes++
	old, replaced := t.writable(ix).Set(&entry{key: key, row: row})
	if ix.group != nil {
		t.grouped = append(t.grouped, groupedKey{ix, key})
	}
	return old, replaced
}

func (t *Txn) del(ix *index, key []byte) {
	t.writes++
	t.pivot.key = key
	t.writable(ix).Delete(&t.pivot)
	t.pivot.key = nil
	if ix.group != nil {
		t.grouped = append(t.grouped, groupedKey{ix, key})
	}
}

// addSize adds delta to the table's size, copying the sizes the first time
// this transaction changes one.
func (t *Txn) addSize(tb *table, delta Size) {
	if delta == (Size{}) {
		return
	}
	if t.sizes == nil {
		t.sizes = append([]Size(nil), t.base.sizes...)
	}
	t.sizes[tb.n] = t.sizes[tb.n].plus(delta)
}

// Delete removes the row with row's id; ErrNotFound if there is none.
func (t *Txn) Delete(tableName string, row any) error {
	tb, id, err := t.rowID("delete", tableName, row)
	if err != nil {
		return err
	}
	idIx := tb.indexes[0]
	e, found := t.get(t.view(idIx), id)
	if !found {
		return ErrNotFound
	}
	return t.remove(tb, id, e.row)
}

// remove deletes a stored row (found under id) from every index, keyed as
// it was stored.
func (t *Txn) remove(tb *table, id []byte, stored any) error {
	all := t.changes[:0]
	defer func() { clear(all); t.changes = all[:0] }()
	for _, ix := range tb.indexes[1:] {
		all = append(all, change{ix: ix})
		g := &all[len(all)-1]
		keys, has, err := ix.keys(stored, id, &g.oldOne)
		if err != nil {
			return err
		}
		if has {
			g.oldKeys = keys
		}
	}
	t.del(tb.indexes[0], id)
	if t.db.rowSize != nil {
		t.addSize(tb, Size{}.minus(t.db.rowSize(tb.name, stored)))
	}
	for i := range all {
		g := &all[i]
		for _, k := range g.oldKeys {
			t.del(g.ix, k)
		}
	}
	return nil
}

// DeleteAll removes every row a Get of the same arguments returns and
// says how many.
func (t *Txn) DeleteAll(tableName, indexName string, args ...any) (int, error) {
	if !t.write || t.done {
		return 0, fmt.Errorf("cannot delete in read-only transaction")
	}
	it, err := t.Get(tableName, indexName, args...)
	if err != nil {
		return 0, err
	}
	var rows []any
	for r := it.Next(); r != nil; r = it.Next() {
		rows = append(rows, r)
	}
	for _, r := range rows {
		if err := t.Delete(tableName, r); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// First returns the first row a Get of the same arguments returns, or nil.
func (t *Txn) First(tableName, indexName string, args ...any) (any, error) {
	ix, key, err := t.db.readKey(tableName, indexName, args)
	if err != nil {
		return nil, err
	}
	return t.first(ix, key), nil
}

// first is the first row of ix whose key begins with key, or nil.
func (t *Txn) first(ix *index, key []byte) any {
	bt := t.view(ix)
	// A key that is there is the first row of its prefix: the usual case
	// (a lookup by id) costs one descent.
	if e, ok := t.get(bt, key); ok {
		return t.rowOf(ix, e)
	}
	it := bt.Iter()
	defer it.Release()
	t.pivot.key = key
	ok := it.Seek(&t.pivot)
	t.pivot.key = nil
	if ok && bytes.HasPrefix(it.Item().key, key) {
		return t.rowOf(ix, it.Item())
	}
	return nil
}

// rowOf is the row of e, an entry of ix: the entry's own, or for an index
// that names its rows by key, the row now stored under the key's id.
func (t *Txn) rowOf(ix *index, e *entry) any {
	if ix.idOf == nil {
		return e.row
	}
	stored, ok := t.get(t.view(ix.idIx), ix.idOf(e.key))
	if !ok {
		panic(fmt.Sprintf("cowdb: index %s holds a key whose row is not stored", ix.name))
	}
	return stored.row
}

// FirstWatch is First with a channel closed when the rows it read change.
func (t *Txn) FirstWatch(tableName, indexName string, args ...any) (<-chan struct{}, any, error) {
	ix, key, err := t.db.readKey(tableName, indexName, args)
	if err != nil {
		return nil, nil, err
	}
	return t.base.trees[ix.n].replaced.get(), t.first(ix, key), nil
}

// Get iterates, in key order, the rows whose key in the index begins with
// the key args give (every row for no args; with an index name ending in
// "_prefix", the indexer's prefix of args).
func (t *Txn) Get(tableName, indexName string, args ...any) (*Iterator, error) {
	ix, key, err := t.db.readKey(tableName, indexName, args)
	if err != nil {
		return nil, err
	}
	return t.iterate(ix, key, key, false), nil
}

// LowerBound iterates, in key order, the rows from the first whose key is
// at least the key args give, to the end of the index.
func (t *Txn) LowerBound(tableName, indexName string, args ...any) (*Iterator, error) {
	ix, key, err := t.db.readKey(tableName, indexName, args)
	if err != nil {
		return nil, err
	}
	return t.iterate(ix, key, nil, false), nil
}

// ReverseLowerBound iterates, in reverse key order, the rows from the last
// whose key is at most the key args give, to the start of the index.
func (t *Txn) ReverseLowerBound(tableName, indexName string, args ...any) (*Iterator, error) {
	ix, key, err := t.db.readKey(tableName, indexName, args)
	if err != nil {
		return nil, err
	}
	return t.iterate(ix, key, nil, true), nil
}

// Len is how many rows a table holds.
func (t *Txn) Len(tableName string) int {
	tb, ok := t.db.tables[tableName]
	if !ok {
		return 0
	}
	return t.view(tb.indexes[0]).Len()
}

// Size is the sum of the sizes (Options.RowSize) of the rows a table
// holds, kept as they are written: reading it costs nothing.
func (t *Txn) Size(tableName string) Size {
	tb, ok := t.db.tables[tableName]
	if !ok {
		return Size{}
	}
	if t.sizes != nil {
		return t.sizes[tb.n]
	}
	return t.base.sizes[tb.n]
}
