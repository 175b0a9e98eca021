package cowdb

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/tidwall/btree"
)

var closed = func() *chan struct{} {
	c := make(chan struct{})
	close(c)
	return &c
}()

// watchPoint is a channel made on the first watch and closed by fire; a
// watch after the fire gets a closed channel, so no change is missed
// between a read and its watch.
type watchPoint struct {
	ch atomic.Pointer[chan struct{}]
}

func (w *watchPoint) get() <-chan struct{} {
	for {
		if p := w.ch.Load(); p != nil {
			return *p
		}
		c := make(chan struct{})
		if w.ch.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

func (w *watchPoint) fire() {
	if old := w.ch.Swap(closed); old != nil && old != closed {
		close(*old)
	}
}

// prefixWatches are the watches of one group of an index's rows (a
// session's event pages), so a write wakes only its group's watchers.
type prefixWatches struct {
	mu      sync.Mutex
	n       atomic.Int64 // len(waiting), read by commits without the lock
	waiting map[groupID]chan struct{}
}

type groupID struct {
	ix     int
	prefix string
}

// watch returns a channel closed when a row of ix under prefix changes
// after the view t read. A change already committed since that view
// returns a closed channel.
func (p *prefixWatches) watch(t *Txn, ix *index, prefix []byte) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Under the lock no commit wakes watchers, and a commit publishes
	// before it wakes: either the rows compare changed here, or the commit
	// finds this watch.
	if cur := t.db.current.Load().trees[ix.n].bt; !sameRows(t.view(ix), cur, prefix) {
		return *closed
	}
	if p.waiting == nil {
		p.waiting = map[groupID]chan struct{}{}
	}
	id := groupID{ix.n, string(prefix)}
	ch, ok := p.waiting[id]
	if !ok {
		ch = make(chan struct{})
		p.waiting[id] = ch
		p.n.Store(int64(len(p.waiting)))
	}
	return ch
}

// wake closes the watches of the groups of keys.
func (p *prefixWatches) wake(keys []groupedKey) {
	if len(keys) == 0 || p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		id := groupID{k.ix.n, string(k.ix.group(k.key))}
		if ch, ok := p.waiting[id]; ok {
			close(ch)
			delete(p.waiting, id)
		}
	}
	p.n.Store(int64(len(p.waiting)))
}

// sameRows reports whether two trees hold the same entries under prefix.
// Entries are never reused, so equal entries mean rows not written since.
func sameRows(a, b *btree.BTreeG[*entry], prefix []byte) bool {
	if a == b {
		return true
	}
	ia, ib := a.Iter(), b.Iter()
	defer ia.Release()
	defer ib.Release()
	okA, okB := ia.Seek(&entry{key: prefix}), ib.Seek(&entry{key: prefix})
	for {
		okA = okA && bytes.HasPrefix(ia.Item().key, prefix)
		okB = okB && bytes.HasPrefix(ib.Item().key, prefix)
		if !okA || !okB {
			return okA == okB
		}
		if ia.Item() != ib.Item() {
			return false
		}
		okA, okB = ia.Next(), ib.Next()
	}
}
