package store

import (
	"iter"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Bulk jobs (docs/bulk.md): one row per job, keyed by id. The rules bound
// the table (fsm.MaxBulkJobs): a job that ended is dropped by its
// retention or to make room for a new one.

// TableBulkJobs holds the BulkJob rows.
const TableBulkJobs = "bulk_jobs"

var bulkJobIndexes = indexes{
	IndexID: {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
}

// BulkJob returns a job, or nil.
func (t *Txn) BulkJob(id string) *fsmpb.BulkJob {
	return lookup[*fsmpb.BulkJob](t, TableBulkJobs, IndexID, id)
}

// BulkJobs iterates every job, by id.
func (t *Txn) BulkJobs() iter.Seq[*fsmpb.BulkJob] {
	return scan[*fsmpb.BulkJob](t, TableBulkJobs, IndexID)
}
