package dispatch

import (
	"slices"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// UnhealthyAfter is how many of a Worker's tasks in a row must expire
// unclaimed before the broker marks it unhealthy. One can be bad luck (the
// Worker died right after the poll); two in a row is a Worker that takes
// tasks and does not run them.
const UnhealthyAfter = 2

// workerHealth is the broker's count of one Worker's unclaimed expiries.
type workerHealth struct {
	inARow    uint32
	total     uint64
	unhealthy bool
	// session: where its last task expired unclaimed, since its last claim.
	session string
}

// stepSeen is how far the health book has read a Step's attempts: every
// attempt below next has ended and was counted; claimed is the last attempt
// whose claim was counted.
type stepSeen struct {
	next    uint32
	claimed uint32
}

// healthBook is the leader's bookkeeping of Workers that take tasks and never
// claim them. It is fed the Steps the broker re-reads and counts each
// attempt's claim or unclaimed expiry once. It lives with the broker (guarded
// by its mutex): a new leader rebuilds it from the Steps it loads.
type healthBook struct {
	workers map[string]*workerHealth
	steps   map[string]stepSeen
	// onChange, when set, hears a Worker turn unhealthy or healthy again.
	onChange func(worker string, unhealthy bool, inARow uint32)
}

func newHealthBook() *healthBook {
	return &healthBook{workers: map[string]*workerHealth{}, steps: map[string]stepSeen{}}
}

// expiredUnclaimed reports whether an attempt ended by expiry before its
// Worker claimed it: the Worker took the task and never started it.
func expiredUnclaimed(at *fsmpb.Attempt) bool {
	return at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_EXPIRED && at.ClaimedAtMs == 0
}

// lastExpiredUnclaimedBy is the Worker whose attempt of a queued Step
// expired unclaimed last ("" when the last attempt did not).
func lastExpiredUnclaimedBy(s *fsmpb.Step) string {
	if n := len(s.Attempts); n > 0 && expiredUnclaimed(s.Attempts[n-1]) {
		return s.Attempts[n-1].WorkerId
	}
	return ""
}

// observe reads a Step as the state has it now (nil: gone). A Step seen
// for the first time is read from its last attempt: on a new leader, a
// queued Step whose last attempt expired unclaimed counts against its Worker.
func (h *healthBook) observe(id string, s *fsmpb.Step) {
	if s == nil {
		delete(h.steps, id)
		return
	}
	live := s.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED || s.Status == fsmpb.StepStatus_STEP_STATUS_RUNNING
	seen, ok := h.steps[id]
	if !ok {
		if !live {
			return // ended before this leader saw it: nothing to count
		}
		seen = stepSeen{next: max(uint32(len(s.Attempts)), 1)}
	}
	for n := seen.next; int(n) <= len(s.Attempts); n++ {
		at := s.Attempts[n-1]
		if at.ClaimedAtMs != 0 && seen.claimed < n {
			seen.claimed = n
			h.claimed(at.WorkerId)
		}
		if at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
			break
		}
		seen.next = n + 1
		if expiredUnclaimed(at) {
			h.expired(at.WorkerId, s.SessionId)
		}
	}
	if live {
		h.steps[id] = seen
	} else {
		delete(h.steps, id)
	}
}

func (h *healthBook) worker(id string) *workerHealth {
	w := h.workers[id]
	if w == nil {
		w = &workerHealth{}
		h.workers[id] = w
	}
	return w
}

// claimed: the Worker started a task; it is healthy again.
func (h *healthBook) claimed(id string) {
	w := h.workers[id]
	if w == nil {
		return
	}
	was := w.unhealthy
	w.inARow, w.unhealthy, w.session = 0, false, ""
	if was && h.onChange != nil {
		h.onChange(id, false, 0)
	}
}

// expired: a task of the Worker, in session, expired before it claimed it.
func (h *healthBook) expired(id, session string) {
	if id == "" {
		return
	}
	w := h.worker(id)
	w.inARow++
	w.total++
	w.session = session
	if !w.unhealthy && w.inARow >= UnhealthyAfter {
		w.unhealthy = true
		if h.onChange != nil {
			h.onChange(id, true, w.inARow)
		}
	}
}

// avoids reports whether the Worker should leave the session's Steps to
// another one: it is unhealthy, or a task of the session expired unclaimed
// on it since its last claim. A stopped Worker's long poll stays open on
// the leader, so the session's next Step, not only the retry, would go to
// it and expire too.
func (h *healthBook) avoids(id, session string) bool {
	w := h.workers[id]
	return w != nil && (w.unhealthy || w.session == session)
}

// forget drops the bookkeeping of Workers the state no longer has.
func (h *healthBook) forget(registered func(string) bool) {
	for id := range h.workers {
		if !registered(id) {
			delete(h.workers, id)
		}
	}
}

// report lists the Workers with at least one unclaimed expiry, by id.
func (h *healthBook) report() []*dexv1.WorkerHealth {
	out := make([]*dexv1.WorkerHealth, 0, len(h.workers))
	for id, w := range h.workers {
		out = append(out, &dexv1.WorkerHealth{WorkerId: id, Unhealthy: w.unhealthy, UnclaimedInARow: w.inARow, UnclaimedExpiries: w.total})
	}
	slices.SortFunc(out, func(a, b *dexv1.WorkerHealth) int { return strings.Compare(a.WorkerId, b.WorkerId) })
	return out
}
