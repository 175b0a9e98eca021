// Package cowdb is the state store's engine: tables of rows, each index a
// copy-on-write B-tree (github.com/tidwall/btree). A write transaction
// copies an index's tree in O(1) the first time it writes it and clones only
// the nodes on the paths it changes; its commit publishes every tree it
// wrote at once, so a reader takes a consistent view of all of them with one
// atomic load and never waits.
//
// It reads go-memdb's schema and indexers and answers go-memdb's calls
// (Insert, Delete, First, Get, LowerBound, ReverseLowerBound, watches) with
// the same results in the same order, at a fraction of the allocations: a
// radix-tree insert copies a node per key byte and tracks each in an LRU,
// a B-tree set clones about three nodes.
package cowdb

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/btree"

	memdb "github.com/hashicorp/go-memdb"
)

// ErrNotFound is returned when a row to delete is not there.
var ErrNotFound = memdb.ErrNotFound

// DB holds the tables. One write transaction runs at a time; reads run
// beside it and beside each other.
type DB struct {
	tables  map[string]*table
	current atomic.Pointer[version]

	// writer is held by the write transaction under way.
	writer sync.Mutex
	// copyMu serialises the O(1) copies of a published tree: a copy stamps
	// the tree it copies, and the writer and a scratch transaction may copy
	// the same one at once.
	copyMu sync.Mutex

	watches prefixWatches
	rowSize func(table string, row any) Size
}

// table is a table's indexes: the id index first, then the others by name.
type table struct {
	name    string
	n       int // its size's position in a version
	indexes []*index
	byName  map[string]*index
}

type index struct {
	n      int // its tree's position in a version
	name   string
	unique bool
	// allowMissing: a row without a value is left out; otherwise it is an error.
	allowMissing bool
	single       memdb.SingleIndexer
	multi        memdb.MultiIndexer
	indexer      memdb.Indexer
	// group maps a key to the prefix a fine-grained watch is registered
	// under (nil: the index's watches are coarse).
	group func(key []byte) []byte
	// idOf, for an index that names its rows by key (Options.ByKey), gives
	// the id in a key; idIx is the table's id index, where the row is read.
	idOf func(key []byte) []byte
	idIx *index
}

// version is one committed state: a tree per index, and per table the sum
// of its rows' sizes (Options.RowSize), kept as the rows are written.
type version struct {
	trees []*tree
	sizes []Size
}

// Size is what a row, or a table's rows together, hold: bytes, and items
// (1 for a plain row; a row standing for several records says how many).
type Size struct {
	Bytes, Items int64
}

func (s Size) plus(o Size) Size  { return Size{s.Bytes + o.Bytes, s.Items + o.Items} }
func (s Size) minus(o Size) Size { return Size{s.Bytes - o.Bytes, s.Items - o.Items} }

type tree struct {
	bt *btree.BTreeG[*entry]
	// replaced fires once a commit replaces this tree with a changed one.
	replaced watchPoint
}

// entry is one key of an index and the row it leads to. An entry is never
// changed once in a tree: a write puts a new one, so two views hold the same
// entry exactly when the key's row did not change between them.
type entry struct {
	key []byte
	row any
}

func less(a, b *entry) bool { return bytes.Compare(a.key, b.key) < 0 }

// Options tune the store beyond the schema.
type Options struct {
	// WatchGroups names, per "table.index", how a key maps to the prefix
	// its rows are watched by: a prefix scan of that index whose prefix is
	// a group watches only that group's rows. Other watches fire on any
	// change of the index.
	WatchGroups map[string]func(key []byte) []byte
	// RowSize is a row's size, what Txn.Size adds up per table (nil: the
	// sums are zero). It must depend on the row's content only, and a
	// stored row must not change, so the sum stays the sum of the rows
	// there.
	RowSize func(table string, row any) Size
	// ByKey names, per "table.index", how to read a row's id from a key of
	// that index. Such an index's entries are written only when a row gets
	// a key it did not have, not each time the row is rewritten with the
	// same keys (a write of a row with k keys costs no index write for
	// them); its readers read the row by id. For an index whose keys
	// rarely change while its rows often do.
	ByKey map[string]func(key []byte) []byte
}

// New returns an empty store for schema.
func New(schema *memdb.DBSchema, opts Options) (*DB, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	db := &DB{tables: make(map[string]*table, len(schema.Tables)), rowSize: opts.RowSize}
	names := make([]string, 0, len(schema.Tables))
	for name := range schema.Tables {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		ts := schema.Tables[name]
		t := &table{name: name, n: len(db.tables), byName: make(map[string]*index, len(ts.Indexes))}
		ixNames := make([]string, 0, len(ts.Indexes))
		for ixName := range ts.Indexes {
			if ixName != "id" {
				ixNames = append(ixNames, ixName)
			}
		}
		sort.Strings(ixNames)
		for _, ixName := range append([]string{"id"}, ixNames...) {
			is := ts.Indexes[ixName]
			ix := &index{n: n, name: ixName, unique: is.Unique, allowMissing: is.AllowMissing, indexer: is.Indexer,
				group: opts.WatchGroups[name+"."+ixName], idOf: opts.ByKey[name+"."+ixName]}
			if ix.idOf != nil {
				if ixName == "id" || !is.Unique {
					return nil, fmt.Errorf("table %s index %s: only a unique index other than id can name its rows by key", name, ixName)
				}
				ix.idIx = t.indexes[0]
			}
			switch x := is.Indexer.(type) {
			case memdb.SingleIndexer:
				ix.single = x
			case memdb.MultiIndexer:
				ix.multi = x
			default:
				return nil, fmt.Errorf("table %s index %s: indexer %T is neither single nor multi", name, ixName, is.Indexer)
			}
			if ixName == "id" && ix.single == nil {
				return nil, fmt.Errorf("table %s: the id index must be a single indexer", name)
			}
			t.indexes = append(t.indexes, ix)
			t.byName[ixName] = ix
			n++
		}
		db.tables[name] = t
	}
	v := &version{trees: make([]*tree, n), sizes: make([]Size, len(db.tables))}
	for i := range v.trees {
		v.trees[i] = &tree{bt: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true})}
	}
	db.current.Store(v)
	return db, nil
}

// Txn starts a transaction. A write one waits for the write under way, if
// any, and must end with Commit or Abort; a read one is a view of the state
// as last committed that never changes and never waits.
func (db *DB) Txn(write bool) *Txn {
	if write {
		db.writer.Lock()
	}
	return db.txn(write, false)
}

// Scratch starts a write transaction on the state as last committed whose
// changes are never published: it neither waits for nor holds up the
// store's writer, and its Commit only ends it.
func (db *DB) Scratch() *Txn { return db.txn(true, true) }

func (db *DB) txn(write, scratch bool) *Txn {
	t := &Txn{db: db, write: write, scratch: scratch, base: db.current.Load()}
	if write {
		t.trees = make([]*btree.BTreeG[*entry], len(t.base.trees))
	}
	return t
}

func (db *DB) lookup(tableName, indexName string) (*table, *index, bool, error) {
	t, ok := db.tables[tableName]
	if !ok {
		return nil, nil, false, fmt.Errorf("invalid table '%s'", tableName)
	}
	prefix := false
	if strings.HasSuffix(indexName, "_prefix") {
		indexName, prefix = strings.TrimSuffix(indexName, "_prefix"), true
	}
	ix, ok := t.byName[indexName]
	if !ok {
		return nil, nil, false, fmt.Errorf("invalid index '%s'", indexName)
	}
	return t, ix, prefix, nil
}

// readKey is the index a read names and the key its args give.
func (db *DB) readKey(tableName, indexName string, args []any) (*index, []byte, error) {
	_, ix, prefix, err := db.lookup(tableName, indexName)
	if err != nil {
		return nil, nil, err
	}
	key, err := ix.argsKey(prefix, args)
	if err != nil {
		return nil, nil, err
	}
	return ix, key, nil
}

// argsKey is the key prefix a read of ix with args covers: all of the index
// for no args, the indexer's prefix for a prefix read, its key otherwise.
func (ix *index) argsKey(prefix bool, args []any) ([]byte, error) {
	if len(args) == 0 {
		return nil, nil
	}
	if prefix {
		p, ok := ix.indexer.(memdb.PrefixIndexer)
		if !ok {
			return nil, fmt.Errorf("index '%s' does not support prefix scanning", ix.name)
		}
		k, err := p.PrefixFromArgs(args...)
		if err != nil {
			return nil, fmt.Errorf("index error: %v", err)
		}
		return k, nil
	}
	k, err := ix.indexer.FromArgs(args...)
	if err != nil {
		return nil, fmt.Errorf("index error: %v", err)
	}
	return k, nil
}

// keys returns the keys a row has in ix (a non-unique index's keys end
// with the row's id key, so they are unique), and whether it has any.
// A single indexer's key is returned in one, to spare an allocation.
func (ix *index) keys(row any, id []byte, one *[1][]byte) ([][]byte, bool, error) {
	var keys [][]byte
	var ok bool
	var err error
	if ix.single != nil {
		ok, one[0], err = ix.single.FromObject(row)
		keys = one[:]
	} else {
		ok, keys, err = ix.multi.FromObject(row)
	}
	if err != nil {
		return nil, false, fmt.Errorf("failed to build index '%s': %v", ix.name, err)
	}
	if !ok {
		return nil, false, nil
	}
	if !ix.unique {
		for i := range keys {
			keys[i] = append(keys[i], id...)
		}
	}
	return keys, true, nil
}
