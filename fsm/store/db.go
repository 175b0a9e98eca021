package store

import (
	"fmt"

	"github.com/dexhq/dex/fsm/store/internal/cowdb"
)

// DB is one state store and the channel closed when a Restore replaces it,
// so readers watching it wake up and read the new one.
type DB struct {
	db      *cowdb.DB
	abandon chan struct{}
}

// New returns an empty store whose rule-keyed indexes follow r.
func New(r Routing) *DB {
	db, err := cowdb.New(schema(r), cowdb.Options{WatchGroups: watchGroups, RowSize: rowSize, ByKey: byKey})
	if err != nil {
		panic(fmt.Sprintf("store: schema: %v", err)) // the schema is static
	}
	return &DB{db: db, abandon: make(chan struct{})}
}

// Txn starts a transaction: a write one (one at a time, the caller
// serialises them) or a read one, an immutable view that never waits.
func (d *DB) Txn(write bool) *Txn { return (*Txn)(d.db.Txn(write)) }

// Abandoned is closed once Abandon is called.
func (d *DB) Abandoned() <-chan struct{} { return d.abandon }

// Abandon tells the readers of this store that another replaced it.
func (d *DB) Abandon() { close(d.abandon) }

// Scratch starts a write transaction on a copy of the store as it is now,
// to try commands whose effects are thrown away. The copy costs nothing
// (the trees are copy-on-write), and the transaction never waits for, nor
// holds up, the store's own writer.
func (d *DB) Scratch() *Txn { return (*Txn)(d.db.Scratch()) }

// watchGroups: a watch of a session's event pages (EventsWatch) wakes on
// that session's events alone. An event page's key is the session id, a
// NUL and the page key (8 bytes); the group is what precedes the page key.
var watchGroups = map[string]func(key []byte) []byte{
	TableEvents + "." + IndexID: func(key []byte) []byte { return key[:len(key)-8] },
}

// byKey are the indexes whose entries name their rows by key
// (cowdb.Options.ByKey): the session list indexes, whose keys change far
// less often than their rows.
var byKey = map[string]func([]byte) []byte{
	TableSessions + "." + IndexListCreated: listKeyID,
	TableSessions + "." + IndexListUpdated: listKeyID,
}
