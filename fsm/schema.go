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
	// A session's history entries, inbox messages and accepted message ids
	// are rows of their own keyed (session, seq) or (session, message id), so
	// a command on a long session touches a bounded number of rows.
	tableHistory  = "history"
	tableInbox    = "inbox"
	tableAccepted = "accepted"
)

// Index names.
const (
	indexID     = "id"
	indexStatus = "status"
	// Steps by (session, number): a session's Steps in order, for paging.
	indexSessionNumber = "session_number"

	// indexStatusTool: Steps by status and tool (the queued Steps of a tool).
	indexStatusTool = "status_tool"
)

func schema() *memdb.DBSchema {
	s := &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableSessions: {Name: tableSessions, Indexes: map[string]*memdb.IndexSchema{
			indexID:        {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			indexStatus:    {Name: indexStatus, Indexer: &memdb.IntFieldIndex{Field: "Status"}},
			indexResumeDue: {Name: indexResumeDue, AllowMissing: true, Indexer: dueIndexer{due: resumeDue}},
		}},
		tableSteps: {Name: tableSteps, Indexes: map[string]*memdb.IndexSchema{
			indexID:     {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			indexStatus: {Name: indexStatus, Indexer: &memdb.IntFieldIndex{Field: "Status"}},
			indexSessionNumber: {Name: indexSessionNumber, Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.StringFieldIndex{Field: "SessionId"}, &memdb.UintFieldIndex{Field: "Number"},
			}}},
			indexStatusTool: {Name: indexStatusTool, AllowMissing: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.IntFieldIndex{Field: "Status"}, &memdb.StringFieldIndex{Field: "Tool"},
			}}},
			indexTimerDue: {Name: indexTimerDue, AllowMissing: true, Indexer: dueIndexer{due: timerDue}},
		}},
		tableWorkers: {Name: tableWorkers, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		}},
		tableNodes: {Name: tableNodes, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		}},
		tableEvents: {Name: tableEvents, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.UintFieldIndex{Field: "Seq"}},
		}},
		tableHistory: {Name: tableHistory, Indexes: map[string]*memdb.IndexSchema{indexID: sessionSeqIndex()}},
		tableInbox:   {Name: tableInbox, Indexes: map[string]*memdb.IndexSchema{indexID: sessionSeqIndex()}},
		tableAccepted: {Name: tableAccepted, Indexes: map[string]*memdb.IndexSchema{indexID: {Name: indexID, Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
			&memdb.StringFieldIndex{Field: "SessionId"}, &memdb.StringFieldIndex{Field: "MessageId"},
		}}}}},
		tableMeta: {Name: tableMeta, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		}},
	}}
	for name, t := range catalogTables() {
		s.Tables[name] = t
	}
	return withAgentSchema(withTokenSchema(withLifecycleSchema(withEventSchema(s))))
}

const metaID = "meta"

// sessionSeqIndex keys a row by (SessionId, Seq); seqs are big-endian, so a
// session's rows are contiguous and in seq order.
func sessionSeqIndex() *memdb.IndexSchema {
	return &memdb.IndexSchema{Name: indexID, Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
		&memdb.StringFieldIndex{Field: "SessionId"}, &memdb.UintFieldIndex{Field: "Seq"},
	}}}
}
