package fsm

import "slices"

// Applied is what one applied log entry wrote that the leader's broker reads:
// the ids of the Steps and sessions it put, in the order first written. The
// broker re-reads just those rows instead of rescanning the tables.
type Applied struct {
	Index uint64
	// Steps and Sessions are nil for a rejected command: it changed nothing.
	Steps    []string
	Sessions []string
	// Restored: the whole state was replaced by a snapshot; re-read it all.
	Restored bool
	// Claimed and Ended: the attempts claimed and ended by this entry;
	// Finished: the Steps it made done. Metrics count them.
	Claimed, Ended []AttemptKey
	Finished       []string
	// Providers: the providers whose hold this entry wrote.
	Providers []string
	// Spans: the spans of traced turns this entry ended (tracespans.go).
	Spans []TracedSpan
	// Schedules: the schedules this entry wrote or deleted.
	Schedules []string
}

// touched collects the rows one command writes. Ids are kept in order of
// first write, so the report is deterministic; the sets only test membership.
type touched struct {
	steps, sessions     []string
	stepSet, sessionSet map[string]bool
	providers           []string
	schedules           []string
	out                 outcomes
	spans               []TracedSpan
}

func (t *touched) schedule(id string) {
	if !slices.Contains(t.schedules, id) {
		t.schedules = append(t.schedules, id)
	}
}

func (t *touched) provider(name string) {
	if !slices.Contains(t.providers, name) {
		t.providers = append(t.providers, name)
	}
}

func (t *touched) step(id string) {
	if !t.stepSet[id] {
		if t.stepSet == nil {
			t.stepSet = map[string]bool{}
		}
		t.stepSet[id] = true
		t.steps = append(t.steps, id)
	}
}

func (t *touched) session(id string) {
	if !t.sessionSet[id] {
		if t.sessionSet == nil {
			t.sessionSet = map[string]bool{}
		}
		t.sessionSet[id] = true
		t.sessions = append(t.sessions, id)
	}
}

// notifyApplied reports an applied entry; it runs after the commit and
// outside the lock, so the callback may read the state.
func (f *FSM) notifyApplied(index uint64, t *touched) {
	if f.opts.OnApplied == nil {
		return
	}
	a := &Applied{Index: index}
	if t != nil {
		a.Steps, a.Sessions = t.steps, t.sessions
		a.Claimed, a.Ended, a.Finished = t.out.claimed, t.out.ended, t.out.finished
		a.Providers = t.providers
		a.Spans = t.spans
		a.Schedules = t.schedules
	}
	f.opts.OnApplied(a)
}

// NotifyRestored reports a Restore to OnApplied: every row may have changed.
func (f *FSM) NotifyRestored() {
	if f.opts.OnApplied != nil {
		f.opts.OnApplied(&Applied{Restored: true})
	}
}
