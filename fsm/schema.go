package fsm

import (
	memdb "github.com/hashicorp/go-memdb"
)

// Table names of the state store.
const (
	tableSessions = "sessions"
	tableSteps    = "steps"
	tableWorkers  = "workers"
	tableNodes    = "nodes"
	tableEvents   = "events"
	tableMeta     = "meta"
)

// Index names.
const (
	indexID      = "id"
	indexSession = "session"
	indexStatus  = "status"
)

func schema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableSessions: {Name: tableSessions, Indexes: map[string]*memdb.IndexSchema{
			indexID:        {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			indexStatus:    {Name: indexStatus, Indexer: &memdb.IntFieldIndex{Field: "Status"}},
			indexResumeDue: {Name: indexResumeDue, AllowMissing: true, Indexer: dueIndexer{due: resumeDue}},
		}},
		tableSteps: {Name: tableSteps, Indexes: map[string]*memdb.IndexSchema{
			indexID:       {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			indexSession:  {Name: indexSession, Indexer: &memdb.StringFieldIndex{Field: "SessionId"}},
			indexStatus:   {Name: indexStatus, Indexer: &memdb.IntFieldIndex{Field: "Status"}},
			indexTimerDue: {Name: indexTimerDue, AllowMissing: true, Indexer: dueIndexer{due: timerDue}},
		}},
		tableWorkers: {Name: tableWorkers, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		}},
		tableNodes: {Name: tableNodes, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		}},
		tableEvents: {Name: tableEvents, Indexes: map[string]*memdb.IndexSchema{
			indexID:      {Name: indexID, Unique: true, Indexer: &memdb.UintFieldIndex{Field: "Seq"}},
			indexSession: {Name: indexSession, Indexer: &memdb.StringFieldIndex{Field: "SessionId"}},
		}},
		tableMeta: {Name: tableMeta, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		}},
	}}
}

const metaID = "meta"
