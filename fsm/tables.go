package fsm

import (
	memdb "github.com/hashicorp/go-memdb"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// stateTables registers every table of the state once: its name, the
// SnapshotRecord field its rows travel in and its indexes, and how a
// snapshot writes and reads it when not row by row. A snapshot writes the
// tables in this order (the meta record first, which SnapshotMeta reads),
// so two equal states write equal bytes; a new table is one entry here.
var stateTables = []stateTable{
	table(tableMeta, (*fsmpb.SnapshotRecord).GetMeta, indexes{
		indexID: {Unique: true, Indexer: metaKey},
	}).persistedBy(persistMeta),
	table(tableNodes, (*fsmpb.SnapshotRecord).GetNode, indexes{
		indexID: {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
	}),
	table(tableWorkers, (*fsmpb.SnapshotRecord).GetWorker, indexes{
		indexID:         {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		indexModelAgent: {AllowMissing: true, Indexer: modelAgentIndexer{}},
	}),
	// The tool catalog: one row per tool name holding its policy, and one
	// per (tool, live Worker serving it).
	table(tableTools, (*fsmpb.SnapshotRecord).GetTool, indexes{
		indexID: {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name"}},
	}),
	table(tableWorkerTools, (*fsmpb.SnapshotRecord).GetWorkerTool, indexes{
		indexID: {Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
			&memdb.StringFieldIndex{Field: "Tool"}, &memdb.StringFieldIndex{Field: "WorkerId"},
		}}},
		indexWorker: {Indexer: &memdb.StringFieldIndex{Field: "WorkerId"}},
		indexTool:   {Indexer: &memdb.StringFieldIndex{Field: "Tool"}},
	}),
	table(tableSessions, (*fsmpb.SnapshotRecord).GetSession, indexes{
		indexID:            {Unique: true, Indexer: sessionKey},
		indexResumeDue:     {AllowMissing: true, Indexer: dueIndexer{due: resumeDue}},
		indexStatusUpdated: {AllowMissing: true, Indexer: restingSessionIndexer{}},
	}).restoredBy(restoreSession),
	// A session's history entries and inbox messages are keyed (session,
	// seq), so they are contiguous and in seq order.
	table(tableHistory, (*fsmpb.SnapshotRecord).GetHistory, indexes{
		indexID: {Unique: true, Indexer: historyKey},
	}),
	table(tableInbox, (*fsmpb.SnapshotRecord).GetInbox, indexes{
		indexID: {Unique: true, Indexer: inboxKey},
	}),
	table(tableAccepted, (*fsmpb.SnapshotRecord).GetAccepted, indexes{
		indexID: {Unique: true, Indexer: acceptedKey{}},
	}),
	table(tableSteps, (*fsmpb.SnapshotRecord).GetStep, indexes{
		indexID:       {Unique: true, Indexer: stepKeyIndexer{}},
		indexStatus:   {AllowMissing: true, Indexer: liveStepIndexer{}},
		indexTimerDue: {AllowMissing: true, Indexer: dueIndexer{due: timerDue}},
	}),
	// Events are stored in pages and travel one record per event.
	table(tableEvents, (*fsmpb.SnapshotRecord).GetEvent, indexes{
		indexID: {Unique: true, Indexer: eventPageKey},
	}).persistedBy(persistEvents).restoredBy(restoreEvent),
	table(tableEventLogs, (*fsmpb.SnapshotRecord).GetEventLog, indexes{
		indexID:      {Unique: true, Indexer: eventLogKey},
		indexFirstAt: {AllowMissing: true, Indexer: dueIndexer{due: firstKeptAt}},
	}),
	table(tableTokens, (*fsmpb.SnapshotRecord).GetToken, indexes{
		indexID:     {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		indexSecret: {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "SecretSha256"}},
	}),
}
