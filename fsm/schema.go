package fsm

import (
	"fmt"

	memdb "github.com/hashicorp/go-memdb"

	dexv1 "github.com/dexhq/dex/api/dexv1"
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
)

func schema() *memdb.DBSchema {
	s := &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableSessions: {Name: tableSessions, Indexes: map[string]*memdb.IndexSchema{
			indexID:        {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			indexResumeDue: {Name: indexResumeDue, AllowMissing: true, Indexer: dueIndexer{due: resumeDue}},
		}},
		tableSteps: {Name: tableSteps, Indexes: map[string]*memdb.IndexSchema{
			indexID:     {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
			indexStatus: {Name: indexStatus, AllowMissing: true, Indexer: liveStepIndexer{}},
			indexSessionNumber: {Name: indexSessionNumber, Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.StringFieldIndex{Field: "SessionId"}, &memdb.UintFieldIndex{Field: "Number"},
			}}},
			indexTimerDue: {Name: indexTimerDue, AllowMissing: true, Indexer: dueIndexer{due: timerDue}},
		}},
		tableWorkers: {Name: tableWorkers, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
		}},
		tableNodes: {Name: tableNodes, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Id"}},
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

// liveStepIndexer indexes the Steps still in play (queued, running,
// waiting) by status; a finished Step leaves the index, so the Steps of
// long sessions cost it nothing.
type liveStepIndexer struct{}

func liveStatus(s dexv1.StepStatus) bool {
	switch s {
	case dexv1.StepStatus_STEP_STATUS_QUEUED, dexv1.StepStatus_STEP_STATUS_RUNNING, dexv1.StepStatus_STEP_STATUS_WAITING:
		return true
	}
	return false
}

func (liveStepIndexer) FromObject(obj any) (bool, []byte, error) {
	st, ok := obj.(*dexv1.Step)
	if !ok {
		return false, nil, fmt.Errorf("step status index: %T is not a Step", obj)
	}
	if !liveStatus(st.Status) {
		return false, nil, nil
	}
	return true, []byte{byte(st.Status)}, nil
}

func (liveStepIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("step status index takes one argument, got %d", len(args))
	}
	st, ok := args[0].(dexv1.StepStatus)
	if !ok {
		return nil, fmt.Errorf("step status index argument must be a StepStatus, got %T", args[0])
	}
	if !liveStatus(st) {
		return nil, fmt.Errorf("step status index holds queued, running and waiting Steps, not %s", st)
	}
	return []byte{byte(st)}, nil
}
