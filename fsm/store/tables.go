package store

import (
	memdb "github.com/hashicorp/go-memdb"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// stateTables registers every table of the state once: its name, the
// SnapshotRecord field its rows travel in and its indexes, and how a
// snapshot writes and reads it when not row by row. A snapshot writes the
// tables in this order (the meta record first, which SnapshotMeta reads),
// so two equal states write equal bytes; a new table is one entry here.
// The indexes keyed by the rules take them from r.
func stateTables(r Routing) []stateTable {
	return []stateTable{
		table(TableMeta, (*fsmpb.SnapshotRecord).GetMeta, indexes{
			IndexID: {Unique: true, Indexer: metaKey},
		}).persistedBy(persistMeta),
		table(TableNodes, (*fsmpb.SnapshotRecord).GetNode, indexes{
			IndexID: {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		}),
		table(TableWorkers, (*fsmpb.SnapshotRecord).GetWorker, indexes{
			IndexID:         {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			IndexModelAgent: {AllowMissing: true, Indexer: modelAgentIndexer{agents: r.ModelAgents}},
		}),
		// The tool catalog: one row per tool name holding its policy, and one
		// per (tool, live Worker serving it).
		table(TableTools, (*fsmpb.SnapshotRecord).GetTool, indexes{
			IndexID: {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name"}},
		}),
		table(TableWorkerTools, (*fsmpb.SnapshotRecord).GetWorkerTool, indexes{
			IndexID: {Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.StringFieldIndex{Field: "Tool"}, &memdb.StringFieldIndex{Field: "WorkerId"},
			}}},
			IndexWorker: {Indexer: &memdb.StringFieldIndex{Field: "WorkerId"}},
			IndexTool:   {Indexer: &memdb.StringFieldIndex{Field: "Tool"}},
		}),
		table(TableSessions, (*fsmpb.SnapshotRecord).GetSession, indexes{
			IndexID:            {Unique: true, Indexer: sessionKey},
			IndexResumeDue:     {AllowMissing: true, Indexer: dueIndexer{due: resumeDue}},
			IndexStatusUpdated: {AllowMissing: true, Indexer: restingSessionIndexer{}},
			IndexDeleteDue:     {AllowMissing: true, Indexer: dueIndexer{due: deleteDue}},
			IndexFoldDue:       {AllowMissing: true, Indexer: foldDueIndexer},
			IndexListCreated:   {Unique: true, AllowMissing: true, Indexer: listIndexer{}},
			IndexListUpdated:   {Unique: true, AllowMissing: true, Indexer: listIndexer{updated: true}},
		}).restoredBy(restoreSession),
		// A session's history entries and inbox messages are keyed (session,
		// seq), so they are contiguous and in seq order.
		table(TableHistory, (*fsmpb.SnapshotRecord).GetHistory, indexes{
			IndexID: {Unique: true, Indexer: historyKey},
		}),
		table(TableInbox, (*fsmpb.SnapshotRecord).GetInbox, indexes{
			IndexID: {Unique: true, Indexer: inboxKey},
		}),
		table(TableAccepted, (*fsmpb.SnapshotRecord).GetAccepted, indexes{
			IndexID: {Unique: true, Indexer: acceptedKey{}},
		}),
		table(TableSteps, (*fsmpb.SnapshotRecord).GetStep, indexes{
			IndexID:       {Unique: true, Indexer: stepKeyIndexer{}},
			IndexStatus:   {AllowMissing: true, Indexer: liveStepIndexer{queue: r.StepQueue}},
			IndexTimerDue: {AllowMissing: true, Indexer: dueIndexer{due: timerDue}},
		}),
		// Events are stored in pages and travel one record per event.
		table(TableEvents, (*fsmpb.SnapshotRecord).GetEvent, indexes{
			IndexID: {Unique: true, Indexer: eventPageKey},
		}).persistedBy(persistEvents).restoredBy(restoreEvent),
		table(TableEventLogs, (*fsmpb.SnapshotRecord).GetEventLog, indexes{
			IndexID:      {Unique: true, Indexer: eventLogKey},
			IndexFirstAt: {AllowMissing: true, Indexer: dueIndexer{due: firstKeptAt}},
		}),
		table(TableTokens, (*fsmpb.SnapshotRecord).GetToken, indexes{
			IndexID:     {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			IndexSecret: {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "SecretSha256"}},
		}),
		// Folded turns: what the Steps of a session's older turns were.
		table(TableFoldedTurns, (*fsmpb.SnapshotRecord).GetFoldedTurn, indexes{
			IndexID: {Unique: true, Indexer: foldedTurnKey},
		}),
		table(TableProviderHolds, (*fsmpb.SnapshotRecord).GetProviderHold, providerHoldIndexes),
		table(TableBulkJobs, (*fsmpb.SnapshotRecord).GetBulkJob, bulkJobIndexes),
		table(TableSchedules, (*fsmpb.SnapshotRecord).GetSchedule, scheduleIndexes),
	}
}

// registry is the tables as a snapshot walks them: their order, records
// and hooks do not depend on the Routing.
var registry = stateTables(Routing{})
