package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Long sessions fold: each session keeps the Steps (with their attempts) of
// its last keep_turn_steps finished turns, the cluster-wide setting the
// leader puts in force (SetTurnFolding). The Steps of older finished turns
// are folded by the leader (FoldTurns, bounded) into one FoldedTurn row per
// turn, which keeps their counts by kind, their times and how the turn's
// last Step ended, and they leave the Step table. The history is not folded:
// compaction bounds what the model is sent of it. Each write of a session
// records through which turn it is owed a fold under the setting
// (fold_due_through, against folded_through_turn), and an index holds the
// sessions owed one, and only those: the leader finds them with one seek,
// no Step is scanned, and the index costs the other session writes
// nothing. A lowered setting reaches a session at its next write.

const (
	// MaxFoldSteps bounds the Steps one FoldTurns folds, and
	// MaxFoldSessions the sessions it names.
	MaxFoldSteps    = 1000
	MaxFoldSessions = 100
)

// checkFoldTurns refuses a FoldTurns whose fields are out of range, before
// its epoch is checked.
func checkFoldTurns(c *fsmpb.FoldTurns) *Rejection {
	if c.MaxSteps == 0 || c.MaxSteps > MaxFoldSteps {
		return reject(CodeInvalid, "max_steps must be 1..%d, got %d", MaxFoldSteps, c.MaxSteps)
	}
	if len(c.SessionIds) == 0 || len(c.SessionIds) > MaxFoldSessions {
		return reject(CodeInvalid, "a fold names 1..%d sessions, got %d", MaxFoldSessions, len(c.SessionIds))
	}
	for _, id := range c.SessionIds {
		if r := validID("session id", id); r != nil {
			return r
		}
	}
	return nil
}

func (a *applier) setTurnFolding(c *fsmpb.SetTurnFolding) *Result {
	a.meta().KeepTurnSteps = c.KeepTurnSteps
	return &Result{}
}

// foldTurns folds the Steps of the named sessions' finished turns older
// than their last keep_turn_steps, oldest first, within max_steps. A turn
// folded in part (the budget ran out) is taken up by the next FoldTurns:
// its row gathers what each folded. A session whose fold stops at a Step
// that holds it leaves the index of sessions owed a fold until its next
// write, as does one owed nothing under the setting now (it was lowered or
// turned off since the session was written). A session gone is skipped:
// the leader read a state that may have moved on.
func (a *applier) foldTurns(c *fsmpb.FoldTurns) *Result {
	keep := a.meta().GetKeepTurnSteps()
	budget := int(c.MaxSteps)
	for _, id := range c.SessionIds {
		s, r := a.session(id)
		if r != nil {
			continue
		}
		changed, held := false, false
		if through := foldDueThrough(s, keep); through > 0 && budget > 0 {
			changed, held = a.foldSession(s, through, &budget)
		}
		due := foldDueThrough(s, keep)
		if held {
			due = 0 // parked: its next write looks again
		}
		if due != s.FoldDueThrough {
			s.FoldDueThrough, changed = due, true
		}
		if changed {
			a.insert(store.TableSessions, s) // not putSession: folding is no activity of the session
			a.touched.session(s.Id)
		}
	}
	return &Result{}
}

// foldDueThrough is the turn through which s's Steps are owed a fold when
// it keeps the Steps of its last keep finished turns (0: none owed).
func foldDueThrough(s *fsmpb.Session, keep uint64) uint64 {
	last := store.LastFinishedTurn(s)
	if keep == 0 || last <= keep || last-keep <= s.FoldedThroughTurn {
		return 0
	}
	return last - keep
}

// foldSession folds s's Steps of turns up to through, within budget, and
// moves s.FoldedThroughTurn past the turns it emptied; the caller writes s
// when it reports a change. held: the walk stopped at a Step that holds
// the fold.
func (a *applier) foldSession(s *fsmpb.Session, through uint64, budget *int) (changed, held bool) {
	var row *fsmpb.FoldedTurn
	flush := func() {
		if row != nil {
			a.insert(store.TableFoldedTurns, row)
			row = nil
		}
	}
	done := through // the turn up to which every Step is folded, once the walk ends
	// Collected first: the table is not changed while it is iterated.
	var steps []*fsmpb.Step
	for st := range a.tx.SessionSteps(s.Id, 0) {
		if st.Turn > through {
			break
		}
		held = holdsFold(st)
		if held || len(steps) == *budget {
			done = max(st.Turn, 1) - 1 // st's turn (and any after it) is not folded whole
			break
		}
		steps = append(steps, st)
	}
	for _, st := range steps {
		if row == nil || row.Turn != st.Turn {
			flush()
			row = a.foldedRow(s, st.Turn)
		}
		foldStep(row, st)
		a.delete(store.TableSteps, st)
		s.FoldedSteps++
		*budget--
		changed = true
	}
	flush()
	if done > s.FoldedThroughTurn {
		s.FoldedThroughTurn = done
		changed = true
	}
	return changed, held
}

// foldedRow returns a copy of s's folded row of turn, a new one if it has
// none.
func (a *applier) foldedRow(s *fsmpb.Session, turn uint64) *fsmpb.FoldedTurn {
	if f := a.tx.FoldedTurn(s.Id, turn); f != nil {
		return f.CloneVT()
	}
	return &fsmpb.FoldedTurn{SessionId: s.Id, Turn: turn}
}

// holdsFold reports whether a Step, and so its turn and the turns after it,
// cannot fold yet: it is still in play (queued, running, waiting), or it
// ended outcome_unknown and waits for an operator to reconcile it, which
// names the Step.
func holdsFold(st *fsmpb.Step) bool {
	switch st.Status {
	case fsmpb.StepStatus_STEP_STATUS_QUEUED, fsmpb.StepStatus_STEP_STATUS_RUNNING, fsmpb.StepStatus_STEP_STATUS_WAITING:
		return true
	}
	return st.Outcome == fsmpb.Outcome_OUTCOME_UNKNOWN
}

// foldStep adds one Step (in number order) to its turn's folded row.
func foldStep(f *fsmpb.FoldedTurn, st *fsmpb.Step) {
	attempts := uint32(len(st.Attempts))
	f.Steps++
	f.Attempts += attempts
	if f.FirstStep == 0 || st.Number < f.FirstStep {
		f.FirstStep, f.FirstAtMs = st.Number, st.CreatedAtMs
	}
	if st.Number >= f.LastStep {
		f.LastStep, f.LastStatus, f.LastOutcome, f.LastErrorType = st.Number, st.Status, st.Outcome, st.ErrorType
	}
	if end := max(st.EndedAtMs, st.CreatedAtMs); end > f.LastAtMs {
		f.LastAtMs = end
	}
	if st.Outcome == fsmpb.Outcome_OUTCOME_FAILED || st.ErrorType != fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED {
		f.FailedSteps++
	}
	tool := ""
	if Kind(st.Kind).Runner == RunsOnTool {
		tool = st.Tool
	}
	for _, k := range f.Kinds {
		if k.Kind == st.Kind && k.Tool == tool {
			k.Steps++
			k.Attempts += attempts
			return
		}
	}
	f.Kinds = append(f.Kinds, &fsmpb.FoldedKind{Kind: st.Kind, Tool: tool, Steps: 1, Attempts: attempts})
}

// KeepTurnSteps is the cluster's keep_turn_steps (0: turns never fold).
func (s *State) KeepTurnSteps() uint64 { return s.Meta().GetKeepTurnSteps() }

// FoldDue returns up to limit sessions owed a fold, by id: a seek on the
// index that holds only those.
func (s *State) FoldDue(limit int) []string {
	var out []string
	for sess := range s.tx.FoldDue() {
		if len(out) >= limit {
			break
		}
		out = append(out, sess.Id)
	}
	return out
}

// FoldSweep reads up to scan sessions with an id above after, in id order,
// and returns those the cluster's keep_turn_steps owes a fold whatever their
// index says (a session written before the setting was lowered or turned
// on is not in it), and the id to read on from ("" at the end). The
// leader sweeps once per leadership, a page at a time.
func (s *State) FoldSweep(after string, scan int) (ids []string, next string) {
	keep := s.KeepTurnSteps()
	n := 0
	for sess := range s.tx.SessionsFrom(after) {
		if sess.Id == after {
			continue
		}
		if n++; n > scan {
			return ids, next
		}
		next = sess.Id
		if !deleted(sess) && !importing(sess) && foldDueThrough(sess, keep) > 0 {
			ids = append(ids, sess.Id)
		}
	}
	return ids, ""
}

// FoldedTurns returns up to limit folded turns of a session numbered above
// after, in turn order, and the turn to read on from (0 when none is left).
func (s *State) FoldedTurns(sessionID string, after uint64, limit int) ([]*fsmpb.FoldedTurn, uint64) {
	var out []*fsmpb.FoldedTurn
	for f := range s.tx.FoldedTurns(sessionID, after+1) {
		if len(out) >= limit {
			return out, out[len(out)-1].Turn
		}
		out = append(out, f)
	}
	return out, 0
}
