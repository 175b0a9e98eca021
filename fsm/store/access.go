package store

import (
	"fmt"
	"iter"
	"math"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Typed access to the rest of the tables: lookups by key, the index reads the
// rules and the State make, and deletes. Rows are as stored: shared, to
// read only.

// lookup returns the first row of an index matching args as a T, or the
// zero T.
func lookup[T any](t *Txn, table, index string, args ...any) T {
	var none T
	if raw := t.first(table, index, args...); raw != nil {
		return raw.(T)
	}
	return none
}

// scan iterates the rows of an index matching args, in index order.
func scan[T any](t *Txn, table, index string, args ...any) iter.Seq[T] {
	return func(yield func(T) bool) {
		it, err := t.mem().Get(table, index, args...)
		if err != nil {
			panic(fmt.Sprintf("store: read %s: %v", table, err))
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if !yield(raw.(T)) {
				return
			}
		}
	}
}

// from iterates the rows of an index from the first at or after args.
func from[T any](t *Txn, table, index string, args ...any) iter.Seq[T] {
	return func(yield func(T) bool) {
		it, err := t.mem().LowerBound(table, index, args...)
		if err != nil {
			panic(fmt.Sprintf("store: seek %s: %v", table, err))
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if !yield(raw.(T)) {
				return
			}
		}
	}
}

// Node returns a node's addresses.
func (t *Txn) Node(id string) *fsmpb.NodeInfo {
	return lookup[*fsmpb.NodeInfo](t, TableNodes, IndexID, id)
}

// Tool returns a tool of the catalog (its policy).
func (t *Txn) Tool(name string) *fsmpb.ToolSpec {
	return lookup[*fsmpb.ToolSpec](t, TableTools, IndexID, name)
}

// WorkerTool returns the catalog's row of a Worker serving a tool.
func (t *Txn) WorkerTool(tool, workerID string) *fsmpb.WorkerTool {
	return lookup[*fsmpb.WorkerTool](t, TableWorkerTools, IndexID, tool, workerID)
}

// HasWorkerTools reports whether the catalog has any (tool, Worker) row.
func (t *Txn) HasWorkerTools() bool { return t.first(TableWorkerTools, IndexID) != nil }

// ToolRows iterates the catalog's rows of a tool, by Worker id.
func (t *Txn) ToolRows(tool string) iter.Seq[*fsmpb.WorkerTool] {
	return scan[*fsmpb.WorkerTool](t, TableWorkerTools, IndexTool, tool)
}

// WorkerToolRows returns the catalog's rows of a Worker, by tool.
func (t *Txn) WorkerToolRows(workerID string) []*fsmpb.WorkerTool {
	var out []*fsmpb.WorkerTool
	for wt := range scan[*fsmpb.WorkerTool](t, TableWorkerTools, IndexWorker, workerID) {
		out = append(out, wt)
	}
	return out
}

// DeleteTool removes a tool's policy row, if there is one.
func (t *Txn) DeleteTool(name string) {
	if _, err := t.mem().DeleteAll(TableTools, IndexID, name); err != nil {
		panic(fmt.Sprintf("store: delete %s: %v", TableTools, err))
	}
}

// ModelWorkers iterates the Workers that run an agent's model, by id.
func (t *Txn) ModelWorkers(agent string) iter.Seq[*fsmpb.WorkerInfo] {
	return scan[*fsmpb.WorkerInfo](t, TableWorkers, IndexModelAgent, agent)
}

// Token returns a token by id.
func (t *Txn) Token(id string) *fsmpb.AclToken {
	return lookup[*fsmpb.AclToken](t, TableTokens, IndexID, id)
}

// TokenBySecret returns the token whose secret hashes to sha256Hex.
func (t *Txn) TokenBySecret(sha256Hex string) *fsmpb.AclToken {
	return lookup[*fsmpb.AclToken](t, TableTokens, IndexSecret, sha256Hex)
}

// HasTokens reports whether the tokens table has any row.
func (t *Txn) HasTokens() bool { return t.first(TableTokens, IndexID) != nil }

// LiveSteps iterates the Steps in a status of the live index (queued,
// running, waiting); any other status has none there.
func (t *Txn) LiveSteps(st fsmpb.StepStatus) iter.Seq[*fsmpb.Step] {
	if !liveStatus(st) {
		return func(func(*fsmpb.Step) bool) {}
	}
	return scan[*fsmpb.Step](t, TableSteps, IndexStatus, st)
}

// RunningStepsWatch counts the running Steps and returns a channel closed
// when a Step starts or stops running.
func (t *Txn) RunningStepsWatch() (int, <-chan struct{}) {
	it, err := t.mem().Get(TableSteps, IndexStatus, fsmpb.StepStatus_STEP_STATUS_RUNNING)
	if err != nil {
		panic(fmt.Sprintf("store: read %s: %v", TableSteps, err))
	}
	n := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		n++
	}
	return n, it.WatchCh()
}

// QueueSteps iterates the queued Steps of one ready queue: the model Steps
// of an agent (model set) or one tool's Steps of an agent.
func (t *Txn) QueueSteps(model bool, tool, agent string) iter.Seq[*fsmpb.Step] {
	return scan[*fsmpb.Step](t, TableSteps, IndexQueue, model, tool, agent)
}

// ToolQueueSteps iterates the queued Steps of a tool, every agent's.
func (t *Txn) ToolQueueSteps(tool string) iter.Seq[*fsmpb.Step] {
	return scan[*fsmpb.Step](t, TableSteps, IndexQueue+"_prefix", false, tool)
}

// SessionSteps iterates a session's Steps with a number of at least n, in
// number order.
func (t *Txn) SessionSteps(sessionID string, n uint64) iter.Seq[*fsmpb.Step] {
	return func(yield func(*fsmpb.Step) bool) {
		for st := range from[*fsmpb.Step](t, TableSteps, IndexSessionNumber, sessionID, n) {
			if st.SessionId != sessionID || !yield(st) {
				return
			}
		}
	}
}

// SessionsFrom iterates the session headers with an id of at least id, in
// id order, tombstones included.
func (t *Txn) SessionsFrom(id string) iter.Seq[*fsmpb.Session] {
	return from[*fsmpb.Session](t, TableSessions, IndexID, id)
}

// SessionsAtRest iterates the sessions in a status at rest (idle, errored,
// paused, deleted), least recently updated first.
func (t *Txn) SessionsAtRest(status fsmpb.SessionStatus) iter.Seq[*fsmpb.Session] {
	return func(yield func(*fsmpb.Session) bool) {
		for s := range from[*fsmpb.Session](t, TableSessions, IndexStatusUpdated, status, int64(math.MinInt64)) {
			if s.Status != status || !yield(s) {
				return
			}
		}
	}
}

// ClosedByDeleteAt iterates the closed sessions that the retention lets go
// some day, the earliest first.
func (t *Txn) ClosedByDeleteAt() iter.Seq[*fsmpb.Session] {
	return scan[*fsmpb.Session](t, TableSessions, IndexDeleteDue)
}

// EventLogsByFirstAt iterates the EventLogs that keep an event, the oldest
// first kept event first.
func (t *Txn) EventLogsByFirstAt() iter.Seq[*fsmpb.EventLog] {
	return scan[*fsmpb.EventLog](t, TableEventLogs, IndexFirstAt)
}

// EventsWatch returns a channel closed when the session's event pages
// change: it watches the index node of the session's own pages (for a
// session without any, the nearest node above, which may fire early).
func (t *Txn) EventsWatch(sessionID string) <-chan struct{} {
	it, err := t.mem().Get(TableEvents, IndexID+"_prefix", sessionID)
	if err != nil {
		return nil
	}
	return it.WatchCh()
}

// MetaWatch returns a channel closed when the meta row is written: on
// every applied entry.
func (t *Txn) MetaWatch() <-chan struct{} {
	ch, _, err := t.mem().FirstWatch(TableMeta, IndexID, MetaID)
	if err != nil {
		return nil
	}
	return ch
}

// TableWatch returns the rows of a table in id order and a channel closed
// when the table changes.
func TableWatch[T any](t *Txn, table string) ([]T, <-chan struct{}) {
	it, err := t.mem().Get(table, IndexID)
	if err != nil {
		return nil, nil
	}
	var out []T
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(T))
	}
	return out, it.WatchCh()
}

// SessionRowsOf iterates a session's rows of a table keyed by session first
// (Steps, history, inbox, accepted message ids), in index order: what a
// purge removes.
func (t *Txn) SessionRowsOf(table, sessionID string) iter.Seq[any] {
	var first any = uint64(0)
	if table == TableAccepted {
		first = ""
	}
	return func(yield func(any) bool) {
		it, err := t.mem().LowerBound(table, IndexID, sessionID, first)
		if err != nil {
			panic(fmt.Sprintf("store: seek %s: %v", table, err))
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if rowSessionOf(raw) != sessionID || !yield(raw) {
				return
			}
		}
	}
}

func rowSessionOf(raw any) string {
	switch v := raw.(type) {
	case *fsmpb.Step:
		return v.SessionId
	case *fsmpb.AcceptedMessage:
		return v.SessionId
	}
	return rowSession(raw)
}

// EventLogs iterates every session's EventLog, in session order.
func (t *Txn) EventLogs() iter.Seq[*fsmpb.EventLog] {
	return scan[*fsmpb.EventLog](t, TableEventLogs, IndexID)
}

// Sessions iterates every session header in id order, tombstones included.
func (t *Txn) Sessions() iter.Seq[*fsmpb.Session] {
	return scan[*fsmpb.Session](t, TableSessions, IndexID)
}

// OldestEventLog returns the EventLog whose first kept event is the oldest
// any session keeps, or nil when none keeps one.
func (t *Txn) OldestEventLog() *fsmpb.EventLog {
	return lookup[*fsmpb.EventLog](t, TableEventLogs, IndexFirstAt)
}
