package cowdb

import (
	"fmt"
	"math/rand"
	"testing"
)

func rowSize(table string, r any) Size {
	x := r.(*row)
	return Size{Bytes: int64(len(x.ID) + len(x.Group) + x.N), Items: int64(1 + len(x.Tags))}
}

// recount is the sum of the sizes of every row a view holds.
func recount(t *testing.T, tx *Txn) Size {
	it, err := tx.Get("rows", "id")
	if err != nil {
		t.Fatal(err)
	}
	var n Size
	for r := it.Next(); r != nil; r = it.Next() {
		n = n.plus(rowSize("rows", r))
	}
	return n
}

// A table's size (bytes and items) is the sum of its rows' sizes after any sequence of
// inserts, replacements and deletes; an aborted transaction's writes and a
// scratch transaction's leave it as it was, and a reader keeps the count of
// the version it reads.
func TestBytesFollowTheRows(t *testing.T) {
	db, err := New(testSchema(), Options{RowSize: rowSize})
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewSource(7))
	for round := range 300 {
		before := db.Txn(false)
		want := before.Size("rows")
		var tx *Txn
		if round%5 == 4 {
			tx = db.Scratch()
		} else {
			tx = db.Txn(true)
		}
		for range 1 + rnd.Intn(6) {
			id := fmt.Sprintf("k%02d", rnd.Intn(40))
			if rnd.Intn(3) == 0 {
				_ = tx.Delete("rows", &row{ID: id})
			} else if err := tx.Insert("rows", &row{ID: id, Group: "g", N: rnd.Intn(1000), Tags: make([]string, rnd.Intn(3))}); err != nil {
				t.Fatal(err)
			}
		}
		if got, sum := tx.Size("rows"), recount(t, tx); got != sum {
			t.Fatalf("round %d: in the transaction %+v, the rows sum to %+v", round, got, sum)
		}
		if round%7 == 3 && round%5 != 4 {
			tx.Abort()
		} else {
			tx.Commit()
		}
		if got := before.Size("rows"); got != want {
			t.Fatalf("round %d: a reader's sizes changed from %+v to %+v", round, want, got)
		}
		now := db.Txn(false)
		if got, sum := now.Size("rows"), recount(t, now); got != sum {
			t.Fatalf("round %d: committed %+v, the rows sum to %+v", round, got, sum)
		}
	}
	if db.Txn(false).Size("nosuch") != (Size{}) {
		t.Fatal("an unknown table has bytes")
	}
}

// Without a RowSize the counts stay zero.
func TestBytesWithoutRowSize(t *testing.T) {
	db, _ := New(testSchema(), Options{})
	tx := db.Txn(true)
	if err := tx.Insert("rows", &row{ID: "a", N: 5}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if got := db.Txn(false).Size("rows"); got != (Size{}) {
		t.Fatalf("Size without RowSize: %+v", got)
	}
}
