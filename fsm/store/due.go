package store

import (
	"encoding/binary"
	"fmt"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// The due-time indexes the leader's broker loads from when it starts: it
// reads only the rows that owe a FireTimer or a ResumeErrored.

// dueIndexer indexes the objects for which due returns ok by that time, big
// endian so the index iterates in time order. Objects without a due time are
// not in the index.
type dueIndexer struct {
	due func(obj any) (int64, bool)
}

func (x dueIndexer) FromObject(obj any) (bool, []byte, error) {
	at, ok := x.due(obj)
	if !ok {
		return false, nil, nil
	}
	return true, dueKey(at), nil
}

func (x dueIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("due index takes one argument, got %d", len(args))
	}
	at, ok := args[0].(int64)
	if !ok {
		return nil, fmt.Errorf("due index argument must be an int64, got %T", args[0])
	}
	return dueKey(at), nil
}

func dueKey(at int64) []byte {
	// Flipping the sign bit keeps negative times before positive ones.
	return binary.BigEndian.AppendUint64(nil, uint64(at)^(1<<63))
}

func timerDue(obj any) (int64, bool) {
	st, ok := obj.(*fsmpb.Step)
	if !ok || st.Kind != fsmpb.StepKind_STEP_KIND_AWAIT_TIMER || st.Status != fsmpb.StepStatus_STEP_STATUS_WAITING {
		return 0, false
	}
	return st.DueAtMs, true
}

// ResumeDue is when the leader owes an errored session a ResumeErrored (ok
// false when it owes none).
func ResumeDue(s *fsmpb.Session) (int64, bool) {
	if s == nil || s.Status != fsmpb.SessionStatus_SESSION_STATUS_ERRORED || s.Turn == nil || s.ResumeAtMs == 0 {
		return 0, false
	}
	return s.ResumeAtMs, true
}

// TimerDue is when the leader owes a Step a FireTimer (ok false when it
// owes none).
func TimerDue(st *fsmpb.Step) (int64, bool) { return timerDue(st) }

func resumeDue(obj any) (int64, bool) {
	s, ok := obj.(*fsmpb.Session)
	if !ok {
		return 0, false
	}
	return ResumeDue(s)
}

var (
	_ memdb.Indexer       = dueIndexer{}
	_ memdb.SingleIndexer = dueIndexer{}
)

// DeleteDue is when the retention lets a closed session go (ok false when
// it is not closed or is kept for ever).
func DeleteDue(s *fsmpb.Session) (int64, bool) {
	if s == nil || s.Status != fsmpb.SessionStatus_SESSION_STATUS_CLOSED || s.DeleteAtMs == 0 {
		return 0, false
	}
	return s.DeleteAtMs, true
}

func deleteDue(obj any) (int64, bool) {
	s, ok := obj.(*fsmpb.Session)
	if !ok {
		return 0, false
	}
	return DeleteDue(s)
}

// firstKeptAt is when the oldest event an EventLog's session keeps was
// emitted (ok false when it keeps none).
func firstKeptAt(obj any) (int64, bool) {
	l, ok := obj.(*fsmpb.EventLog)
	if !ok || l.FirstSeq == 0 {
		return 0, false
	}
	return l.FirstAtMs, true
}
