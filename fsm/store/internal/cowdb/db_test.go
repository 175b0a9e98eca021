package cowdb

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	memdb "github.com/hashicorp/go-memdb"
)

type row struct {
	ID    string
	Group string
	Tags  []string
	N     int
}

func testSchema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		"rows": {Name: "rows", Indexes: map[string]*memdb.IndexSchema{
			"id":    {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
			"group": {Name: "group", AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "Group"}},
			"tags":  {Name: "tags", AllowMissing: true, Indexer: &memdb.StringSliceFieldIndex{Field: "Tags"}},
		}},
	}}
}

func collect(it interface{ Next() any }) []string {
	var out []string
	for r := it.Next(); r != nil; r = it.Next() {
		x := r.(*row)
		out = append(out, fmt.Sprintf("%s/%s/%d", x.ID, x.Group, x.N))
	}
	return out
}

// The store answers every read as go-memdb does, after any sequence of
// inserts, updates and deletes, committed or aborted.
func TestAnswersAsMemdb(t *testing.T) {
	mem, err := memdb.NewMemDB(testSchema())
	if err != nil {
		t.Fatal(err)
	}
	cow, err := New(testSchema(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewSource(1))
	key := func() string { return fmt.Sprintf("k%02d", rnd.Intn(60)) }
	for round := range 400 {
		mt, ct := mem.Txn(true), cow.Txn(true)
		for range 1 + rnd.Intn(8) {
			id := key()
			if rnd.Intn(4) == 0 {
				r := &row{ID: id}
				me, ce := mt.Delete("rows", r), ct.Delete("rows", r)
				if (me == nil) != (ce == nil) {
					t.Fatalf("round %d: delete %s: memdb %v, cowdb %v", round, id, me, ce)
				}
				continue
			}
			r := &row{ID: id, N: round}
			if g := rnd.Intn(5); g > 0 {
				r.Group = fmt.Sprintf("g%d", g)
			}
			for range rnd.Intn(3) {
				r.Tags = append(r.Tags, fmt.Sprintf("t%d", rnd.Intn(4)))
			}
			if err := mt.Insert("rows", r); err != nil {
				t.Fatal(err)
			}
			if err := ct.Insert("rows", r); err != nil {
				t.Fatal(err)
			}
		}
		if rnd.Intn(5) == 0 {
			mt.Abort()
			ct.Abort()
		} else {
			mt.Commit()
			ct.Commit()
		}
		mr, cr := mem.Txn(false), cow.Txn(false)
		probe := key()
		reads := []struct {
			name string
			m    func() (memdb.ResultIterator, error)
			c    func() (*Iterator, error)
		}{
			{"all", func() (memdb.ResultIterator, error) { return mr.Get("rows", "id") }, func() (*Iterator, error) { return cr.Get("rows", "id") }},
			{"group", func() (memdb.ResultIterator, error) { return mr.Get("rows", "group", "g2") }, func() (*Iterator, error) { return cr.Get("rows", "group", "g2") }},
			{"tags", func() (memdb.ResultIterator, error) { return mr.Get("rows", "tags", "t1") }, func() (*Iterator, error) { return cr.Get("rows", "tags", "t1") }},
			{"prefix", func() (memdb.ResultIterator, error) { return mr.Get("rows", "id_prefix", "k1") }, func() (*Iterator, error) { return cr.Get("rows", "id_prefix", "k1") }},
			{"lower", func() (memdb.ResultIterator, error) { return mr.LowerBound("rows", "id", probe) }, func() (*Iterator, error) { return cr.LowerBound("rows", "id", probe) }},
			{"reverse", func() (memdb.ResultIterator, error) { return mr.ReverseLowerBound("rows", "id", probe) }, func() (*Iterator, error) {
				return cr.ReverseLowerBound("rows", "id", probe)
			}},
			{"group lower", func() (memdb.ResultIterator, error) { return mr.LowerBound("rows", "group", "g3") }, func() (*Iterator, error) { return cr.LowerBound("rows", "group", "g3") }},
		}
		for _, rd := range reads {
			mi, err := rd.m()
			if err != nil {
				t.Fatal(err)
			}
			ci, err := rd.c()
			if err != nil {
				t.Fatal(err)
			}
			if m, c := collect(mi), collect(ci); !reflect.DeepEqual(m, c) {
				t.Fatalf("round %d, read %s (probe %s):\nmemdb %v\ncowdb %v", round, rd.name, probe, m, c)
			}
		}
		mf, _ := mr.First("rows", "group", "g1")
		cf, _ := cr.First("rows", "group", "g1")
		if !reflect.DeepEqual(mf, cf) {
			t.Fatalf("round %d: First: memdb %v, cowdb %v", round, mf, cf)
		}
	}
}

// A refused row leaves the transaction as it was, with a clear error.
func TestBadRowsAreRefused(t *testing.T) {
	cow, err := New(testSchema(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tx := cow.Txn(true)
	defer tx.Abort()
	if err := tx.Insert("rows", &row{}); err == nil || err.Error() != "object missing primary index" {
		t.Fatalf("a row without id: %v", err)
	}
	if err := tx.Insert("nope", &row{ID: "a"}); err == nil || err.Error() != "invalid table 'nope'" {
		t.Fatalf("an unknown table: %v", err)
	}
	if err := tx.Delete("rows", &row{ID: "a"}); err != ErrNotFound {
		t.Fatalf("delete of a missing row: %v", err)
	}
	if _, err := tx.Get("rows", "nope"); err == nil || err.Error() != "invalid index 'nope'" {
		t.Fatalf("an unknown index: %v", err)
	}
	if n := tx.Len("rows"); n != 0 {
		t.Fatalf("rows after refusals: %d", n)
	}
	ro := cow.Txn(false)
	if err := ro.Insert("rows", &row{ID: "a"}); err == nil {
		t.Fatal("a read transaction took an insert")
	}
}

// A reader's view never changes, and a write never waits for readers.
func TestReadersKeepTheirView(t *testing.T) {
	cow, _ := New(testSchema(), Options{})
	w := cow.Txn(true)
	_ = w.Insert("rows", &row{ID: "a", N: 1})
	w.Commit()
	r := cow.Txn(false)
	w = cow.Txn(true)
	_ = w.Insert("rows", &row{ID: "a", N: 2})
	_ = w.Insert("rows", &row{ID: "b", N: 2})
	w.Commit()
	it, _ := r.Get("rows", "id")
	if got := collect(it); !reflect.DeepEqual(got, []string{"a//1"}) {
		t.Fatalf("old view reads %v", got)
	}
	it, _ = cow.Txn(false).Get("rows", "id")
	if got := collect(it); !reflect.DeepEqual(got, []string{"a//2", "b//2"}) {
		t.Fatalf("new view reads %v", got)
	}
	s := cow.Scratch()
	_ = s.Insert("rows", &row{ID: "c"})
	s.Commit()
	if n := cow.Txn(false).Len("rows"); n != 2 {
		t.Fatalf("a scratch write was published: %d rows", n)
	}
}

func closedNow(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Index watches fire on a change of the index; group watches only on a
// change of their group, and at once for a change made since the view.
func TestWatches(t *testing.T) {
	cow, _ := New(testSchema(), Options{WatchGroups: map[string]func([]byte) []byte{
		"rows.group": func(k []byte) []byte { return k[:2] }, // "gN", as PrefixFromArgs gives it
	}})
	put := func(r *row) {
		w := cow.Txn(true)
		if err := w.Insert("rows", r); err != nil {
			t.Fatal(err)
		}
		w.Commit()
	}
	put(&row{ID: "a", Group: "g1"})
	r := cow.Txn(false)
	all, _ := r.Get("rows", "id")
	g1, _ := r.Get("rows", "group_prefix", "g1")
	g2, _ := r.Get("rows", "group_prefix", "g2")
	allCh, g1Ch, g2Ch := all.WatchCh(), g1.WatchCh(), g2.WatchCh()
	put(&row{ID: "b", Group: "g2"})
	if !closedNow(allCh) || closedNow(g1Ch) || !closedNow(g2Ch) {
		t.Fatalf("after a g2 write: all %v g1 %v g2 %v", closedNow(allCh), closedNow(g1Ch), closedNow(g2Ch))
	}
	// A watch taken on a view older than a write to its group fires at once.
	g1again, _ := r.Get("rows", "group_prefix", "g1")
	put(&row{ID: "a", Group: "g1", N: 5})
	if !closedNow(g1Ch) {
		t.Fatal("a g1 write did not wake the g1 watch")
	}
	if !closedNow(g1again.WatchCh()) {
		t.Fatal("a watch on a view older than the g1 write waits")
	}
	// A watch on the whole index taken from an old view is closed at once.
	if !closedNow(all.WatchCh()) {
		t.Fatal("an index watch on an old view waits")
	}
}

// A write transaction may delete and insert rows while it walks an index:
// the walk goes on after the last row it returned.
func TestWalkWhileWriting(t *testing.T) {
	cow, _ := New(testSchema(), Options{})
	w := cow.Txn(true)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		_ = w.Insert("rows", &row{ID: id})
	}
	var seen []string
	it, _ := w.Get("rows", "id")
	for r := it.Next(); r != nil; r = it.Next() {
		id := r.(*row).ID
		seen = append(seen, id)
		if err := w.Delete("rows", r); err != nil {
			t.Fatal(err)
		}
		if id == "b" {
			_ = w.Insert("rows", &row{ID: "bb"})
			_ = w.Insert("rows", &row{ID: "a0"})
		}
	}
	if want := []string{"a", "b", "bb", "c", "d", "e"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("walked %v, want %v", seen, want)
	}
	var back []string
	_ = w.Insert("rows", &row{ID: "x"})
	_ = w.Insert("rows", &row{ID: "y"})
	rit, _ := w.ReverseLowerBound("rows", "id", "z")
	for r := rit.Next(); r != nil; r = rit.Next() {
		back = append(back, r.(*row).ID)
		_ = w.Delete("rows", r)
	}
	if want := []string{"y", "x", "a0"}; !reflect.DeepEqual(back, want) {
		t.Fatalf("walked back %v, want %v", back, want)
	}
	w.Commit()
}

// An index that names its rows by key reads each row as it is stored now,
// though a rewrite that keeps the row's key writes no entry of it; a view
// taken before the rewrite keeps the row it saw.
func TestAnIndexByKeyReadsTheStoredRow(t *testing.T) {
	schema := testSchema()
	schema.Tables["rows"].Indexes["group_id"] = &memdb.IndexSchema{Name: "group_id", Unique: true, AllowMissing: true,
		Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{&memdb.StringFieldIndex{Field: "Group"}, &memdb.StringFieldIndex{Field: "ID"}}}}
	idOf := func(key []byte) []byte { return key[bytes.IndexByte(key, 0)+1:] }
	db, err := New(schema, Options{ByKey: map[string]func([]byte) []byte{"rows.group_id": idOf}})
	if err != nil {
		t.Fatal(err)
	}
	write := func(r *row) {
		tx := db.Txn(true)
		if err := tx.Insert("rows", r); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
	}
	read := func(tx *Txn, group string) []string {
		it, err := tx.Get("rows", "group_id_prefix", group)
		if err != nil {
			t.Fatal(err)
		}
		return collect(it)
	}
	write(&row{ID: "a", Group: "g", N: 1})
	before := db.Txn(false)
	write(&row{ID: "a", Group: "g", N: 2})
	if got := read(db.Txn(false), "g"); fmt.Sprint(got) != "[a/g/2]" {
		t.Fatalf("after a rewrite with the same key: %v", got)
	}
	if got := read(before, "g"); fmt.Sprint(got) != "[a/g/1]" {
		t.Fatalf("a view from before the rewrite: %v", got)
	}
	write(&row{ID: "a", Group: "h", N: 3})
	now := db.Txn(false)
	if g, h := read(now, "g"), read(now, "h"); len(g) != 0 || fmt.Sprint(h) != "[a/h/3]" {
		t.Fatalf("after the key changed: g %v, h %v", g, h)
	}
	if _, err := New(schema, Options{ByKey: map[string]func([]byte) []byte{"rows.id": idOf}}); err == nil {
		t.Fatal("an id index naming its rows by key was accepted")
	}
}
