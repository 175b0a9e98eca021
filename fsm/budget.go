package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Budgets and the loop guard (docs/budgets.md). A session's model calls
// report their usage; the session, its turn and its ancestors total it.
// Before each model call the session is checked against its budget, its
// ancestors' and the loop guard, and before each turn against its turn
// limit: the first one reached pauses it (PAUSE_REASON_BUDGET or _LOOP),
// with whatever was in flight recorded. Raising the budget (SetBudget) and
// resuming continues it.

// DefaultLoopLimit is the loop limit of a budget that sets none.
const DefaultLoopLimit = wirerules.DefaultLoopLimit

// maxBudgetAncestors bounds the ancestors a session's usage is added to and
// checked against, so that a model call touches a bounded number of rows.
const maxBudgetAncestors = 16

// loopLimit is b's loop limit.
func loopLimit(b *fsmpb.Budget) uint32 {
	if n := b.GetLoopLimit(); n > 0 {
		return n
	}
	return DefaultLoopLimit
}

func addUsage(t **fsmpb.UsageTotals, u *fsmpb.Usage, modelCalls, toolCalls uint64) {
	if *t == nil {
		*t = &fsmpb.UsageTotals{}
	}
	(*t).InputTokens += u.GetInputTokens()
	(*t).OutputTokens += u.GetOutputTokens()
	(*t).CostMicros += u.GetCostMicros()
	(*t).ModelCalls += modelCalls
	(*t).ToolCalls += toolCalls
}

func tokens(t *fsmpb.UsageTotals) uint64 { return t.GetInputTokens() + t.GetOutputTokens() }

// recordModelOutput counts one model call of s's turn, what it used and
// the tool calls it asked for, in the Step, the turn, the session and its
// ancestors (one walk up), and each distinct call once for the loop guard:
// a loop is the same call made output after output, not one output asking
// for it twice.
func (a *applier) recordModelOutput(s *fsmpb.Session, st *fsmpb.Step, out *fsmpb.ModelOutput) {
	if out.Usage != nil {
		st.Usage = out.Usage.CloneVT()
	}
	a.countUsage(s, out.Usage, 1, uint64(len(out.ToolCalls)))
	var seen []*fsmpb.CallRepeat
	for _, tc := range out.ToolCalls {
		sum := sha256.Sum256([]byte(canonicalArguments(tc.Arguments)))
		var rep *fsmpb.CallRepeat
		for _, r := range s.Turn.CallRepeats {
			if r.Tool == tc.Tool && bytes.Equal(r.ArgumentsSha256, sum[:]) {
				rep = r
				break
			}
		}
		if rep == nil {
			rep = &fsmpb.CallRepeat{Tool: tc.Tool, ArgumentsSha256: sum[:]}
			s.Turn.CallRepeats = append(s.Turn.CallRepeats, rep)
		}
		if !slices.Contains(seen, rep) {
			seen = append(seen, rep)
			rep.Count++
		}
	}
}

// callArguments is the arguments of the turn's latest call that r counts,
// for a message ("" when none of them is).
func callArguments(s *fsmpb.Session, r *fsmpb.CallRepeat) string {
	for _, c := range s.Turn.GetCalls() {
		if sum := sha256.Sum256([]byte(canonicalArguments(c.Arguments))); c.Tool == r.Tool && bytes.Equal(sum[:], r.ArgumentsSha256) {
			return c.Arguments
		}
	}
	return ""
}

func (a *applier) countUsage(s *fsmpb.Session, u *fsmpb.Usage, modelCalls, toolCalls uint64) {
	if s.Turn != nil {
		addUsage(&s.Turn.Usage, u, modelCalls, toolCalls)
	}
	addUsage(&s.Usage, u, modelCalls, toolCalls)
	addUsage(&s.TreeUsage, u, modelCalls, toolCalls)
	a.eachAncestor(s, func(p *fsmpb.Session) bool {
		addUsage(&p.TreeUsage, u, modelCalls, toolCalls)
		return true
	}, true)
}

// eachAncestor calls fn with s's parent, its parent and so on, at most
// maxBudgetAncestors of them, until fn returns false; write puts each
// one back. A session the caller holds is passed as held, and not put.
func (a *applier) eachAncestor(s *fsmpb.Session, fn func(*fsmpb.Session) bool, write bool) {
	id := s.ParentId
	for range maxBudgetAncestors {
		if id == "" || id == s.Id {
			return
		}
		var p *fsmpb.Session
		own := false
		if h := a.held; h != nil && h.Id == id {
			p = h
		} else {
			var r *Rejection
			if p, r = a.session(id); r != nil {
				return
			}
			own = true
		}
		more := fn(p)
		if write && own {
			a.putSession(p)
		}
		if !more {
			return
		}
		id = p.ParentId
	}
}

// canonicalArguments is a tool call's arguments with JSON objects' keys in
// order and no insignificant space, so that the same call written twice
// is recognised; arguments that are not JSON are kept as they are.
func canonicalArguments(args string) string {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return args
	}
	b, err := json.Marshal(v) // map keys are written sorted
	if err != nil {
		return args
	}
	return string(b)
}

// beforeModelCall is why s must pause before its turn's next model call
// ("" when it may go on), and the reason to pause with.
func (a *applier) beforeModelCall(s *fsmpb.Session) (fsmpb.PauseReason, string) {
	b, turn := s.Budget, s.Turn.GetUsage()
	limit := loopLimit(b)
	for _, r := range s.Turn.GetCallRepeats() {
		if r.Count >= r.Allowed+limit {
			return fsmpb.PauseReason_PAUSE_REASON_LOOP, fmt.Sprintf(
				"The tool call %s(%s) was made %d times in this turn (the loop limit is %d). Resume the session to let it go on.",
				r.Tool, clip(callArguments(s, r), 200), r.Count, limit)
		}
	}
	switch {
	case b.GetMaxModelCallsPerTurn() > 0 && turn.GetModelCalls() >= uint64(b.MaxModelCallsPerTurn):
		return budgetPause(fmt.Sprintf("this turn made %d model calls, its budget's max_model_calls_per_turn", turn.GetModelCalls()))
	case b.GetMaxToolCallsPerTurn() > 0 && turn.GetToolCalls() > uint64(b.MaxToolCallsPerTurn):
		return budgetPause(fmt.Sprintf("this turn made %d tool calls, over its budget's max_tool_calls_per_turn of %d", turn.GetToolCalls(), b.MaxToolCallsPerTurn))
	}
	if why := spentBudget("its", s); why != "" {
		return budgetPause(why)
	}
	var why string
	a.eachAncestor(s, func(p *fsmpb.Session) bool {
		why = spentBudget(fmt.Sprintf("its ancestor %s's", p.Id), p)
		return why == ""
	}, false)
	if why != "" {
		return budgetPause(why)
	}
	return fsmpb.PauseReason_PAUSE_REASON_UNSPECIFIED, ""
}

// spentBudget is why s's tokens or cost, its own and its descendants',
// reached its budget ("" when they did not).
func spentBudget(whose string, s *fsmpb.Session) string {
	b, used := s.Budget, s.TreeUsage
	switch {
	case b.GetMaxTokens() > 0 && tokens(used) >= b.MaxTokens:
		return fmt.Sprintf("%s budget of %d tokens is spent (%d used)", whose, b.MaxTokens, tokens(used))
	case b.GetMaxCostMicros() > 0 && used.GetCostMicros() >= b.MaxCostMicros:
		return fmt.Sprintf("%s budget of %d cost micro-units is spent (%d used)", whose, b.MaxCostMicros, used.GetCostMicros())
	}
	return ""
}

func budgetPause(why string) (fsmpb.PauseReason, string) {
	return fsmpb.PauseReason_PAUSE_REASON_BUDGET, "The session reached a budget: " + why + ". Raise the budget and resume the session to go on."
}

// beforeTurn is why s must pause before it starts another turn ("" when
// it may).
func beforeTurn(s *fsmpb.Session) string {
	if m := s.Budget.GetMaxTurns(); m > 0 && s.NextTurn-1 >= m {
		_, msg := budgetPause(fmt.Sprintf("it started %d turns, its budget's max_turns", s.NextTurn-1))
		return msg
	}
	return ""
}

// pauseWith pauses s for reason, telling its parent once.
func (a *applier) pauseWith(s *fsmpb.Session, reason fsmpb.PauseReason, msg string) {
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_PAUSED
	s.PauseReason, s.PauseMessage = reason, msg
	s.ResumeAtMs = 0
	a.emit(s.Id, "session_paused", "", msg)
	a.tellParent(s, fmt.Sprintf("<child-paused agent=%q>%s</child-paused>", s.Id, msg))
}

// allowRepeats lets a turn paused by the loop guard go on: each call may
// be made loop-limit more times before the guard fires again.
func allowRepeats(s *fsmpb.Session) {
	for _, r := range s.Turn.GetCallRepeats() {
		r.Allowed = r.Count
	}
}

// setBudget applies a SetBudget: the given fields replace the budget's.
func (a *applier) setBudget(c *fsmpb.SetBudget) *Result {
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	ch := c.Change
	if ch == nil || (ch.MaxTokens == nil && ch.MaxCostMicros == nil && ch.MaxTurns == nil &&
		ch.MaxModelCallsPerTurn == nil && ch.MaxToolCallsPerTurn == nil && ch.LoopLimit == nil) {
		return rejected(reject(CodeInvalid, "the budget change names no field"))
	}
	if s.Budget == nil {
		s.Budget = &fsmpb.Budget{}
	}
	b := s.Budget
	set64 := func(dst *uint64, v *uint64) {
		if v != nil {
			*dst = *v
		}
	}
	set32 := func(dst *uint32, v *uint32) {
		if v != nil {
			*dst = *v
		}
	}
	set64(&b.MaxTokens, ch.MaxTokens)
	set64(&b.MaxCostMicros, ch.MaxCostMicros)
	set64(&b.MaxTurns, ch.MaxTurns)
	set32(&b.MaxModelCallsPerTurn, ch.MaxModelCallsPerTurn)
	set32(&b.MaxToolCallsPerTurn, ch.MaxToolCallsPerTurn)
	set32(&b.LoopLimit, ch.LoopLimit)
	a.emit(s.Id, "budget_changed", "", wirerules.BudgetText(b.API()))
	a.putSession(s)
	return &Result{SessionID: s.Id}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
