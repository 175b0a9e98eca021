package stream

import (
	"sort"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A watch that resumes after a takeover may hold offsets of attempts that
// ended before it came back, with all their output on the old leader: this
// hub holds nothing of them, and End, which tells the watchers that resumed
// such an attempt, ran before this watch was one of them. The watch reads
// those ends from the replicated state instead.

// tellEndedBefore tells w the end of each attempt of keys (in w's from, held
// by nothing here when w registered) that has ended by the replicated
// state, at the offset w holds. w registered before the state is read, so
// an End that ran before the registration is in that state (End runs once
// its entry is applied) and is told here; an End that runs after it tells w
// itself and takes the attempt out of w.from, and is not told here again.
// The lookups, by Step id, are made outside the hub's lock.
func (h *Hub) tellEndedBefore(w *Watcher, keys []Key) {
	st := h.src.State()
	var ended []Delta
	for _, k := range keys {
		if kind := endedInState(st, w.session, k); kind != 0 {
			ended = append(ended, Delta{Session: w.session, Key: k, Kind: kind})
		}
	}
	if len(ended) == 0 {
		return
	}
	sort.Slice(ended, func(i, j int) bool { return keyLess(ended[i].Key, ended[j].Key) })
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range ended {
		at, untold := w.from[d.Key]
		// Told already, or the hub holds the attempt now: its End tells w.
		if w.closed || !untold || h.outputs[d.Key] != nil {
			continue
		}
		delete(w.from, d.Key)
		d.Offset = at
		select {
		case w.ch <- d:
		default:
			h.dropWatcher(w, true)
		}
	}
}

// endedInState is how attempt k of a Step of session ended by st, by the
// rule Service.Applied ends it with (endKind); 0 while it is the Step's
// running attempt, or when st does not hold it as the session's (a Step of
// another session, or an attempt this node has yet to apply).
func endedInState(st *fsm.State, session string, k Key) Kind {
	step := st.Step(k.Step)
	if step == nil || step.SessionId != session || k.Attempt == 0 || int(k.Attempt) > len(step.Attempts) {
		return 0
	}
	if int(k.Attempt) == len(step.Attempts) && step.Attempts[k.Attempt-1].Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
		return 0
	}
	return endKind(step, k.Attempt)
}
