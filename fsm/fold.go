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
// compaction bounds what the model is sent of it. A session counts the
// turns it folded (folded_through_turn), so the leader finds the sessions
// owed a fold through an index of sessions by unfolded finished turns, not
// by scanning Steps.

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
// folded in part (the budget ran out, or a Step of it is still in play) is
// taken up again by the next FoldTurns: its row gathers what each folded.
// A session gone, or with nothing owed, is skipped: the leader read a state
// that may have moved on.
func (a *applier) foldTurns(c *fsmpb.FoldTurns) *Result {
	keep := a.meta().GetKeepTurnSteps()
	if keep == 0 {
		return &Result{}
	}
	budget := int(c.MaxSteps)
	for _, id := range c.SessionIds {
		if budget == 0 {
			break
		}
		s, r := a.session(id)
		if r != nil {
			continue
		}
		last := store.LastFinishedTurn(s)
		if last <= keep || last-keep <= s.FoldedThroughTurn {
			continue
		}
		if a.foldSession(s, last-keep, &budget) {
			a.insert(store.TableSessions, s) // not putSession: folding is no activity of the session
			a.touched.session(s.Id)
		}
	}
	return &Result{}
}

// foldSession folds s's Steps of turns up to through, within budget, and
// moves s.FoldedThroughTurn past the turns it emptied; the caller writes s
// when it reports a change.
func (a *applier) foldSession(s *fsmpb.Session, through uint64, budget *int) bool {
	changed := false
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
		if holdsFold(st) || len(steps) == *budget {
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
	return changed
}

// foldedRow returns a copy of s's folded row of turn, a new one (counted in
// s.FoldedTurns) if it has none.
func (a *applier) foldedRow(s *fsmpb.Session, turn uint64) *fsmpb.FoldedTurn {
	if f := a.tx.FoldedTurn(s.Id, turn); f != nil {
		return f.CloneVT()
	}
	s.FoldedTurns++
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

// FoldDue returns up to limit sessions with more than keep finished turns
// whose Steps are not folded, leaving out those whose oldest Step holds
// the fold (nothing of them can fold yet); it looks at no more than
// 4*limit sessions.
func (s *State) FoldDue(keep uint64, limit int) []string {
	if keep == 0 || limit <= 0 {
		return nil
	}
	var out []string
	looked := 0
	for sess := range s.tx.FoldDue(keep + 1) {
		if looked++; looked > 4*limit {
			break
		}
		blocked := false
		for st := range s.tx.SessionSteps(sess.Id, 0) {
			blocked = holdsFold(st)
			break
		}
		if !blocked {
			out = append(out, sess.Id)
			if len(out) >= limit {
				break
			}
		}
	}
	return out
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
