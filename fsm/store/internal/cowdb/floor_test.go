package cowdb

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

// floorRows is the table's size: the state of the Apply benchmarks holds
// 10,000 sessions.
const floorRows = 10_000

// writer is what the floor benchmark needs of either engine.
type writer interface {
	Insert(table string, obj any) error
	Commit()
}

// BenchmarkFloor measures the store alone, without Dex: one write
// transaction that updates one row of a 10,000-row table and commits, with
// the row in 1, 2 or 3 indexes, on go-memdb (the store Dex used before) and
// on this engine. Every index of a table holds the row, so an update
// copies the path to it in each index's tree. A command that writes a Step
// (three indexes), an event page and the cluster meta row starts from such
// writes: this is the floor under fsm's BenchmarkApply.
func BenchmarkFloor(b *testing.B) {
	for _, engine := range []string{"memdb", "cowdb"} {
		for _, n := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("%s/indexes=%d", engine, n), func(b *testing.B) {
				idx := map[string]*memdb.IndexSchema{"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}}}
				if n > 1 {
					idx["group"] = &memdb.IndexSchema{Name: "group", Indexer: &memdb.StringFieldIndex{Field: "Group"}}
				}
				if n > 2 {
					idx["extra"] = &memdb.IndexSchema{Name: "extra", AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "Extra"}}
				}
				schema := &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{"rows": {Name: "rows", Indexes: idx}}}
				var txn func() writer
				if engine == "memdb" {
					db, err := memdb.NewMemDB(schema)
					if err != nil {
						b.Fatal(err)
					}
					txn = func() writer { return db.Txn(true) }
				} else {
					db, err := New(schema, Options{})
					if err != nil {
						b.Fatal(err)
					}
					txn = func() writer { return db.Txn(true) }
				}
				rows := make([]*floorRow, floorRows)
				tx := txn()
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
					tx := txn()
					if err := tx.Insert("rows", &r); err != nil {
						b.Fatal(err)
					}
					tx.Commit()
				}
			})
		}
	}
}
