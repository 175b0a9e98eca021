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
	// indexStatusTool: Steps by status and tool (the queued Steps of a tool).
	indexStatusTool = "status_tool"
)

func schema() *memdb.DBSchema {
	s := &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableSessions: {Name: tableSessions, Indexes: map[string]*memdb.IndexSchema{
			indexID:     {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			indexStatus: {Name: indexStatus, Indexer: &memdb.IntFieldIndex{Field: "Status"}},
		}},
		tableSteps: {Name: tableSteps, Indexes: map[string]*memdb.IndexSchema{
			indexID:      {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			indexSession: {Name: indexSession, Indexer: &memdb.StringFieldIndex{Field: "SessionId"}},
			indexStatus:  {Name: indexStatus, Indexer: &memdb.IntFieldIndex{Field: "Status"}},
			indexStatusTool: {Name: indexStatusTool, AllowMissing: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.IntFieldIndex{Field: "Status"}, &memdb.StringFieldIndex{Field: "Tool"},
			}}},
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
	for name, t := range catalogTables() {
		s.Tables[name] = t
	}
	return s
}

const metaID = "meta"
