package fsm

import (
	"fmt"
	"testing"

	memdb "github.com/hashicorp/go-memdb"
)

// floorRow is a row of the floor benchmark's table.
type floorRow struct {
	ID, Group, Extra string
	N                int
}

// BenchmarkMemdbFloor measures go-memdb alone, without Dex: one write
// transaction that updates one row of a 10,000-row table and commits, with
// the row in 1, 2 or 3 indexes. Every index of a table holds the row, so an
// update copies the path to it in each index tree and again in the tree of
// trees at commit. A command that writes a Step (three indexes), an event
// page and the cluster meta row starts from three such writes; this is the
// floor under BenchmarkApply.
func BenchmarkMemdbFloor(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("indexes=%d", n), func(b *testing.B) {
			idx := map[string]*memdb.IndexSchema{"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}}}
			if n > 1 {
				idx["group"] = &memdb.IndexSchema{Name: "group", Indexer: &memdb.StringFieldIndex{Field: "Group"}}
			}
			if n > 2 {
				idx["extra"] = &memdb.IndexSchema{Name: "extra", AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "Extra"}}
			}
			db, err := memdb.NewMemDB(&memdb.DBSchema{Tables: map[string]*memdb.TableSchema{"rows": {Name: "rows", Indexes: idx}}})
			if err != nil {
				b.Fatal(err)
			}
			rows := make([]*floorRow, benchSessions)
			tx := db.Txn(true)
			for i := range rows {
				rows[i] = &floorRow{ID: fmt.Sprintf("s%05d/0001", i), Group: fmt.Sprintf("g%02d", i%50), Extra: "x"}
				if err := tx.Insert("rows", rows[i]); err != nil {
					b.Fatal(err)
				}
			}
			tx.Commit()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r := *rows[i%len(rows)]
				r.N = i
				tx := db.Txn(true)
				if err := tx.Insert("rows", &r); err != nil {
					b.Fatal(err)
				}
				tx.Commit()
			}
		})
	}
}
