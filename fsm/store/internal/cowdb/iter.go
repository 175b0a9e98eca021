package cowdb

import (
	"bytes"

	"github.com/tidwall/btree"
)

// Iterator walks an index's rows in key order (or in reverse). In a write
// transaction that writes the index while it walks, it goes on from the
// last key it returned, on the rows as they are now.
type Iterator struct {
	txn     *Txn
	ix      *index
	it      btree.IterG[*entry]
	writes  uint64 // the transaction's writes when it was positioned
	last    []byte // the key of the row returned last
	pivot   entry  // the key a seek looks for
	start   []byte
	bound   []byte // rows whose key begins with bound (when bounded)
	bounded bool
	reverse bool
	started bool
	ended   bool
}

func (t *Txn) iterate(ix *index, start, bound []byte, reverse bool) *Iterator {
	return &Iterator{txn: t, ix: ix, it: t.view(ix).Iter(), writes: t.writes, start: start, bound: bound, bounded: bound != nil, reverse: reverse}
}

// Next returns the next row, nil after the last.
func (i *Iterator) Next() any {
	if i.ended {
		return nil
	}
	var ok bool
	switch {
	case i.started && i.writes != i.txn.writes:
		// The tree changed under the iterator: find its place again.
		i.it = i.txn.view(i.ix).Iter()
		i.writes = i.txn.writes
		ok = i.seekPast()
	case i.started && i.reverse:
		ok = i.it.Prev()
	case i.started:
		ok = i.it.Next()
	default:
		i.started = true
		ok = i.seek()
	}
	if ok && i.bounded && !bytes.HasPrefix(i.it.Item().key, i.bound) {
		ok = false
	}
	if !ok {
		i.ended = true
		i.it.Release()
		return nil
	}
	i.last = i.it.Item().key
	return i.txn.rowOf(i.ix, i.it.Item())
}

// seekPast positions the iterator on the row after the last one returned.
func (i *Iterator) seekPast() bool {
	i.pivot.key = i.last
	found := i.it.Seek(&i.pivot)
	if i.reverse {
		if !found {
			return i.it.Last()
		}
		return i.it.Prev()
	}
	if found && bytes.Equal(i.it.Item().key, i.last) {
		return i.it.Next()
	}
	return found
}

func (i *Iterator) seek() bool {
	if !i.reverse {
		if i.start == nil {
			return i.it.First()
		}
		i.pivot.key = i.start
		return i.it.Seek(&i.pivot)
	}
	i.pivot.key = i.start
	if !i.it.Seek(&i.pivot) {
		return i.it.Last()
	}
	if bytes.Equal(i.it.Item().key, i.start) {
		return true
	}
	return i.it.Prev()
}

// WatchCh returns a channel closed when the rows the iterator covers
// change. On an index watched by group, a prefix read watches its group
// alone; any other read watches the whole index.
func (i *Iterator) WatchCh() <-chan struct{} {
	if i.ix.group != nil && i.bounded && len(i.bound) > 0 {
		return i.txn.db.watches.watch(i.txn, i.ix, i.bound)
	}
	return i.txn.base.trees[i.ix.n].replaced.get()
}

// Key returns the index key of the row Next returned last (nil before the
// first): a reader of a multi-key index learns which of the row's keys it
// is at.
func (i *Iterator) Key() []byte { return i.last }
