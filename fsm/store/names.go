// Package store is the storage under Dex's state machine: the go-memdb
// schema and its state-table registry, the keys and indexes of every table,
// how rows are encoded, typed access to them inside a transaction, and the
// snapshot codec with its format upgrades. It knows nothing of turns, Steps'
// retries, tokens or the catalog: the rules in package fsm decide what is
// written, and say through Routing what the few rule-keyed indexes need.
// Like the rules, it is deterministic: no clock, iteration in index order.
package store

// Table names of the state store; their indexes and snapshot records are
// registered in stateTables (tables.go).
const (
	TableSessions = "sessions"
	TableSteps    = "steps"
	TableWorkers  = "workers"
	TableNodes    = "nodes"
	TableEvents   = "events"
	TableMeta     = "meta"
	// A session's history entries, inbox messages and accepted message ids
	// are rows of their own keyed (session, seq) or (session, message id), so
	// a command on a long session touches a bounded number of rows.
	TableHistory  = "history"
	TableInbox    = "inbox"
	TableAccepted = "accepted"
	// The tool catalog: one row per tool name holding its policy (a
	// ToolSpec), and one row per (tool, live Worker serving it).
	TableTools       = "tools"
	TableWorkerTools = "worker_tools"
	// Each session's EventLog: where what it keeps of its events begins.
	TableEventLogs = "event_logs"
	// ACL tokens: one row per token, found by id or by its secret's hash.
	TableTokens = "tokens"
)

// Index names.
const (
	IndexID     = "id"
	IndexStatus = "status"
	// Steps by (session, number): a session's Steps in order, for paging.
	// It is the Steps' id index (a Step id names its session and number).
	IndexSessionNumber = IndexID
	// IndexQueue: queued Steps by (runner, tool, agent), the broker's ready
	// queue of each: the queued part of the live Steps index.
	IndexQueue = IndexStatus
	// IndexTimerDue: waiting AwaitTimer Steps by due time.
	IndexTimerDue = "timer_due"
	// IndexResumeDue: errored sessions with a turn to resume, by resume time.
	IndexResumeDue = "resume_due"
	// IndexStatusUpdated: sessions at rest (idle, errored, paused,
	// deleted) by (status, updated_at_ms), so the retention finds the
	// longest-idle sessions and the leader the errored and deleted ones
	// without a scan. A running or waiting session is not in it: its turn
	// writes it at every step, and nothing looks for sessions in a turn.
	IndexStatusUpdated = "status_updated"
	// IndexDeleteDue: closed sessions by when their retention lets them go
	// (delete_at_ms), so the leader finds the ones due without a scan; a
	// session kept for ever is not in it.
	IndexDeleteDue = "delete_due"
	// IndexModelAgent: workers by each agent whose model they run.
	IndexModelAgent = "model_agent"
	// IndexWorker and IndexTool: the catalog's (tool, Worker) rows by one
	// side.
	IndexWorker = "worker"
	IndexTool   = "tool"
	// IndexSecret: tokens by their secret's hash.
	IndexSecret = "secret"
	// IndexSessionSeq: events by (session, page key).
	IndexSessionSeq = IndexID
	// IndexFirstAt: event logs by their first kept event's time, for the
	// retention age (logs that keep nothing are not in it).
	IndexFirstAt = "first_at"
	// IndexListCreated and IndexListUpdated: visible sessions by each
	// ListSessions predicate they match, then created (updated) time and
	// id (session_list.go).
	IndexListCreated = "list_created"
	IndexListUpdated = "list_updated"
)

// MetaID is the id of the one ClusterMeta row.
const MetaID = "meta"
