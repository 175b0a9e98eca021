package store

import (
	"iter"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Folded turns: a session's finished turns whose Steps left the Step table,
// one FoldedTurn row each, keyed (session, turn) like the history, so a
// session's folded turns are contiguous and in turn order.

// TableFoldedTurns holds the FoldedTurn rows.
const TableFoldedTurns = "folded_turns"

// IndexFoldDue: the sessions owed a fold (fold_due_through above
// folded_through_turn), by id. Only those are in it, and a session is owed
// one from the end of a turn until the leader's fold, so the index costs
// the other session writes nothing.
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

// FoldOwed reports whether a session is in the index of those owed a fold.
func FoldOwed(s *fsmpb.Session) bool {
	return s.FoldDueThrough > s.FoldedThroughTurn && s.Status != fsmpb.SessionStatus_SESSION_STATUS_DELETED
}

var foldDueIndexer = stringKey[*fsmpb.Session]{func(s *fsmpb.Session) string {
	if !FoldOwed(s) {
		return "" // not in the index
	}
	return s.Id
}}

// FoldDue iterates the sessions owed a fold, by id.
func (t *Txn) FoldDue() iter.Seq[*fsmpb.Session] {
	return scan[*fsmpb.Session](t, TableSessions, IndexFoldDue)
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
