package store

import (
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Folded turns: a session's finished turns whose Steps left the Step table,
// one FoldedTurn row each, keyed (session, turn) like the history, so a
// session's folded turns are contiguous and in turn order.

// TableFoldedTurns holds the FoldedTurn rows.
const TableFoldedTurns = "folded_turns"

// IndexFoldDue: sessions by how many of their finished turns still hold
// their Steps (then id), so the leader finds the sessions over the cluster's
// keep_turn_steps with one seek; a session with none, or deleted, is not in
// it.
const IndexFoldDue = "fold_due"

var foldedTurnKey = sessionSeqKey[*fsmpb.FoldedTurn]{
	func(f *fsmpb.FoldedTurn) string { return f.SessionId }, func(f *fsmpb.FoldedTurn) uint64 { return f.Turn }}

// LastFinishedTurn is the number of a session's newest finished turn: the
// one before its turn in progress (or kept to be retried), else the one
// before its next (0: none finished).
func LastFinishedTurn(s *fsmpb.Session) uint64 {
	if s.Turn != nil && s.Turn.Number > 0 {
		return s.Turn.Number - 1
	}
	if s.NextTurn > 0 {
		return s.NextTurn - 1
	}
	return 0
}

// UnfoldedTurns is how many of a session's finished turns have not been
// folded.
func UnfoldedTurns(s *fsmpb.Session) uint64 {
	last := LastFinishedTurn(s)
	if last <= s.FoldedThroughTurn {
		return 0
	}
	return last - s.FoldedThroughTurn
}

type foldDueIndexer struct{}

func (foldDueIndexer) FromObject(obj any) (bool, []byte, error) {
	s, ok := obj.(*fsmpb.Session)
	if !ok {
		return false, nil, fmt.Errorf("fold due index: %T is not a Session", obj)
	}
	n := UnfoldedTurns(s)
	if n == 0 || s.Status == fsmpb.SessionStatus_SESSION_STATUS_DELETED {
		return false, nil, nil
	}
	k := make([]byte, 0, 9+len(s.Id))
	return true, append(append(binary.BigEndian.AppendUint64(k, n), s.Id...), 0), nil
}

// FromArgs takes a count of unfolded turns: the sessions with at least it.
func (foldDueIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("fold due index takes a count, got %d arguments", len(args))
	}
	n, ok := args[0].(uint64)
	if !ok {
		return nil, fmt.Errorf("fold due index takes a uint64, got %T", args[0])
	}
	return binary.BigEndian.AppendUint64(nil, n), nil
}

// FoldDue iterates the sessions with at least n unfolded finished turns,
// fewest first.
func (t *Txn) FoldDue(n uint64) iter.Seq[*fsmpb.Session] {
	return from[*fsmpb.Session](t, TableSessions, IndexFoldDue, n)
}

// FoldedTurn returns a session's folded turn, or nil.
func (t *Txn) FoldedTurn(sessionID string, turn uint64) *fsmpb.FoldedTurn {
	return lookup[*fsmpb.FoldedTurn](t, TableFoldedTurns, IndexID, sessionID, turn)
}

// FoldedTurns iterates a session's folded turns numbered at least turn, in
// turn order.
func (t *Txn) FoldedTurns(sessionID string, turn uint64) iter.Seq[*fsmpb.FoldedTurn] {
	return func(yield func(*fsmpb.FoldedTurn) bool) {
		for f := range from[*fsmpb.FoldedTurn](t, TableFoldedTurns, IndexID, sessionID, turn) {
			if f.SessionId != sessionID || !yield(f) {
				return
			}
		}
	}
}
