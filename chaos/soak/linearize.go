package soak

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The linearizability check of the client history: each session is a
// register of what clients wrote to it (its creation, the keys of the
// messages it accepted, the approval and question Steps they resolved) and
// of figures the Workers only grow (history length, last event seq, turns
// completed). A read must see exactly the messages whose send is ordered
// before it, every resolution ordered before it, and figures no smaller
// than any earlier read's or watch's. A call with no answer may have taken
// effect or not; a refusal changed nothing.

// sessionState is one session as the model sees it; comparable with ==.
type sessionState struct {
	created bool
	keys    string // sorted, comma-joined
	done    string // sorted, comma-joined
	hist    uint64
	events  uint64
	turns   uint64
	// closed: a close took effect (the session takes no more messages);
	// gone: a closed session was since deleted (lifecycle mode).
	closed, gone bool
}

func setAdd(set, item string) string {
	if item == "" {
		return set
	}
	parts := splitSet(set)
	if slices.Contains(parts, item) {
		return set
	}
	parts = append(parts, item)
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func splitSet(set string) []string {
	if set == "" {
		return nil
	}
	return strings.Split(set, ",")
}

func joinSet(items []string) string {
	s := slices.Clone(items)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

func subset(a, b string) bool {
	bs := splitSet(b)
	for _, x := range splitSet(a) {
		if !slices.Contains(bs, x) {
			return false
		}
	}
	return true
}

// notFound is the model's reading of a NotFound answer: right for a
// session never created or already gone; for a closed one, it says the
// retention deleted it (when is judged by checkLifecycle); for any other,
// it cannot happen.
func notFound(s sessionState) []sessionState {
	switch {
	case !s.created || s.gone:
		return []sessionState{s}
	case s.closed:
		gone := s
		gone.gone = true
		return []sessionState{gone}
	}
	return nil
}

// sessionStep is the model's transition: the states op may lead to from s
// (none: op cannot happen here).
func sessionStep(s sessionState, op Op) []sessionState {
	if s.gone && op.Answer == AnsOK && (op.Kind != OpWatch || op.WatchMax > 0) {
		return nil // a deleted session answers nothing but NotFound
	}
	either := func(applied sessionState) []sessionState {
		if applied == s {
			return []sessionState{s}
		}
		return []sessionState{s, applied}
	}
	switch op.Kind {
	case OpCreate:
		applied := s
		applied.created = true
		applied.keys = setAdd(s.keys, op.Key)
		switch {
		case op.Answer == AnsOK:
			if s.created {
				return nil
			}
			return []sessionState{applied}
		case op.Answer == AnsUnknown:
			if s.created {
				return []sessionState{s}
			}
			return either(applied)
		case op.Code == "AlreadyExists":
			if !s.created {
				return nil
			}
		}
		return []sessionState{s}
	case OpClose:
		applied := s
		applied.closed = true
		switch {
		case op.Answer == AnsOK:
			if !s.created {
				return nil
			}
			return []sessionState{applied}
		case op.Answer == AnsUnknown:
			if !s.created || s.gone {
				return []sessionState{s}
			}
			return either(applied)
		case op.Code == "NotFound":
			return notFound(s)
		}
		return []sessionState{s}
	case OpSend:
		applied := s
		applied.keys = setAdd(s.keys, op.Key)
		switch {
		case op.Answer == AnsOK:
			if !s.created {
				return nil
			}
			if op.Duplicate && !slices.Contains(splitSet(s.keys), op.Key) {
				return nil
			}
			if s.closed && !op.Duplicate {
				return nil // a closed session takes no message
			}
			return []sessionState{applied}
		case op.Answer == AnsUnknown:
			if !s.created || s.closed {
				return []sessionState{s}
			}
			return either(applied)
		case op.Code == "NotFound":
			return notFound(s)
		}
		return []sessionState{s}
	case OpRead:
		switch {
		case op.Answer == AnsOK:
			next := s
			next.done, next.hist, next.events, next.turns = joinSet(op.Done), op.HistoryLen, op.EventSeq, op.Turns
			if !s.created || joinSet(op.Keys) != s.keys || !subset(s.done, next.done) ||
				op.HistoryLen < s.hist || op.EventSeq < s.events || op.Turns < s.turns ||
				op.Status == dexv1.SessionStatus_SESSION_STATUS_CLOSED.String() && !s.closed {
				return nil
			}
			return []sessionState{next}
		case op.Code == "NotFound":
			return notFound(s)
		}
		return []sessionState{s}
	case OpResolve:
		applied := s
		applied.done = setAdd(s.done, op.Step)
		switch op.Answer {
		case AnsOK:
			return []sessionState{applied}
		case AnsUnknown:
			return either(applied)
		}
		return []sessionState{s}
	case OpWatch:
		if op.Answer == AnsOK && op.WatchMax > 0 {
			if !s.created {
				return nil
			}
			next := s
			next.events = max(s.events, op.WatchMax)
			return []sessionState{next}
		}
		return []sessionState{s}
	}
	return []sessionState{s}
}

// SessionModel is the porcupine model of the client history, partitioned
// by session.
var SessionModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, o := range history {
			id := o.Input.(Op).Session
			if _, ok := by[id]; !ok {
				order = append(order, id)
			}
			by[id] = append(by[id], o)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, id := range order {
			out = append(out, by[id])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{sessionState{}} },
	Step: func(state, input, _ interface{}) []interface{} {
		var out []interface{}
		for _, s := range sessionStep(state.(sessionState), input.(Op)) {
			out = append(out, s)
		}
		return out
	},
	Equal: func(a, b interface{}) bool { return a.(sessionState) == b.(sessionState) },
	DescribeOperation: func(input, _ interface{}) string {
		return describeOp(input.(Op))
	},
	DescribeState: func(state interface{}) string {
		s := state.(sessionState)
		if !s.created {
			return "not created"
		}
		life := ""
		switch {
		case s.gone:
			life = " deleted"
		case s.closed:
			life = " closed"
		}
		return fmt.Sprintf("keys=[%s] done=[%s] history≥%d events≥%d turns≥%d%s", s.keys, s.done, s.hist, s.events, s.turns, life)
	},
}

func describeOp(op Op) string {
	ans := op.Answer
	if op.Code != "" {
		ans += " " + op.Code
	}
	switch op.Kind {
	case OpCreate, OpSend:
		return fmt.Sprintf("%s(%s) → %s", op.Kind, op.Key, ans)
	case OpClose:
		return "close → " + ans
	case OpResolve:
		return fmt.Sprintf("resolve(%s) → %s", op.Step, ans)
	case OpRead:
		if op.Answer != AnsOK {
			return "read → " + ans
		}
		return fmt.Sprintf("read → keys=[%s] done=[%s] history=%d events=%d turns=%d %s", joinSet(op.Keys), joinSet(op.Done), op.HistoryLen, op.EventSeq, op.Turns, op.Status)
	case OpWatch:
		return fmt.Sprintf("watch → max seq %d (%s)", op.WatchMax, ans)
	}
	return op.Kind
}

// porcupineOps turns the history into porcupine's operations; a call
// without an answer may take effect up to the end of time.
func porcupineOps(ops []Op) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := op.Return
		if op.Answer == AnsUnknown {
			ret = math.MaxInt64
		}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Output: nil, Return: ret})
	}
	return out
}

// LinearizabilityResult is porcupine's verdict on a history.
type LinearizabilityResult struct {
	Result string // Ok, Illegal or Unknown (the check timed out)
	// Visualization: the HTML page of an illegal history, when written.
	Visualization string
}

// CheckLinearizable checks the history against SessionModel; an illegal
// history's visualisation is written to visPath (when not empty).
func CheckLinearizable(ops []Op, timeout time.Duration, visPath string) (LinearizabilityResult, error) {
	model := SessionModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, porcupineOps(ops), timeout)
	out := LinearizabilityResult{Result: string(res)}
	if res == porcupine.Illegal && visPath != "" {
		if err := porcupine.VisualizePath(model, info, visPath); err != nil {
			return out, err
		}
		out.Visualization = visPath
	}
	return out, nil
}
