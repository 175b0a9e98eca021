package chaos

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The one scenario every row runs: start a Worker with the row's holds,
// create the session, reach each moment and strike, let the user act and
// the Workers go, wait until the sessions settle, and check the Steps and
// the session from the ledger and GetSession.

// cellRun is one row being played in one cell.
type cellRun struct {
	*cellEnv
	s      *scenario
	id     string   // the session the checks read
	caught []string // the Step caught at each moment ("" if none)
	at     *dexv1.GetSessionResponse
	back   time.Time // when the last fault was over
	final  *dexv1.GetSessionResponse
	// The row's failpoint, armed on this node, evaluated fpBefore times
	// before the moment's call.
	fp       *harness.Node
	fpBefore int
	// What a row's hooks keep across the fault: a call a failpoint holds;
	// the queued Step and the Worker that held the queue.
	pending chan error
	queued  string
	heldBy  string
}

func (e *cellEnv) runScenario(s *scenario) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("row %q: %w", e.cell.Row.Name(), err)
	}
	r := &cellRun{cellEnv: e, s: s}
	e.workerArgs = s.workerArgs
	if s.script != nil {
		if err := e.startProvider(s.script); err != nil {
			return err
		}
	}
	if _, err := e.startWorker(s.hold...); err != nil {
		return err
	}
	if s.policies != nil {
		if err := e.checkPolicies(s.policies); err != nil {
			return err
		}
	}
	var err error
	if s.compacting {
		r.id, err = e.compactingSession(s.message)
	} else {
		r.id, err = e.createSession(s.message, 0)
	}
	if err != nil {
		return err
	}
	if err := r.strikeAll(); err != nil {
		return err
	}
	if !s.afterFault.empty() {
		now, err := e.get(r.id)
		if err != nil {
			return err
		}
		if err := r.checkState(s.afterFault, now); err != nil {
			return fmt.Errorf("after the fault: %w", err)
		}
	}
	for _, h := range s.after {
		if err := h(r); err != nil {
			return err
		}
	}
	e.autoRelease()
	if err := r.settle(); err != nil {
		return err
	}
	return r.checkFinal()
}

// strikeAll reaches each moment and strikes there; under Worker kill it
// strikes the last held Step again at each attempt up to killEvery.
func (r *cellRun) strikeAll() error {
	s := r.s
	strikes := len(s.at)
	if !r.survives() && s.killEvery > 1 {
		strikes += s.killEvery - 1
	}
	done := 0
	strike := func() error {
		done++
		var o strikeOpts
		if done < strikes {
			o.nextWorker = s.hold
		}
		if s.downPast != 0 && r.at != nil {
			if w := stepsBy(r.at, s.downPast, ""); len(w) > 0 {
				o.downUntil = time.UnixMilli(w[0].DueAtMs).Add(500 * time.Millisecond)
			}
		}
		return r.strikeWith(o)
	}
	fpName := r.cell.Row.Failpoint
	for i, m := range s.at {
		step, err := m.reach(r)
		if err != nil {
			return err
		}
		r.caught = append(r.caught, step)
		if fpName != "" && r.fp == nil {
			if r.fp, err = r.armFailpoint(fpName, "sleep(6000)"); err != nil {
				return err
			}
			if r.fpBefore, err = r.fpCount(r.fp, fpName); err != nil {
				return err
			}
		}
		if m.before != nil {
			if err := m.before(r); err != nil {
				return err
			}
		}
		if err := strike(); err != nil {
			return err
		}
		if i < len(s.at)-1 && r.survives() {
			if err := r.release(); err != nil {
				return err
			}
		}
	}
	last := r.caught[len(r.caught)-1]
	for n := 2; done < strikes; n++ {
		if _, err := r.holdUntil(fmt.Sprintf("attempt %d of %s", n, s.at[len(s.at)-1].what), func(h held) bool { return h.Step == last && h.Attempt == n }); err != nil {
			return err
		}
		if err := strike(); err != nil {
			return err
		}
	}
	r.back = time.Now()
	if r.fp != nil {
		_ = r.disarmFailpoint(r.fp, fpName)
	}
	return nil
}

// settle waits until every session of the cell is idle with nothing
// queued (and the checked one completed its turns).
func (r *cellRun) settle() error {
	for _, id := range r.sessions {
		var (
			resp *dexv1.GetSessionResponse
			err  error
		)
		if t := r.s.final.turns; t > 0 {
			resp, err = r.waitFor(id, fmt.Sprintf("idle after %d turns", t), waitLong, func(g *dexv1.GetSessionResponse) bool {
				return g.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE && len(g.Session.Inbox) == 0 && g.Session.TurnsCompleted >= uint64(t)
			})
		} else {
			resp, err = r.waitIdle(id)
		}
		if err != nil {
			return err
		}
		if id == r.id {
			r.final = resp
		}
	}
	return nil
}

func (r *cellRun) checkFinal() error {
	if err := r.checkState(r.s.final, r.final); err != nil {
		return err
	}
	if !r.survives() {
		if err := r.checkState(r.s.killed, r.final); err != nil {
			return err
		}
	}
	for _, x := range r.s.steps {
		if err := r.checkStep(x); err != nil {
			return err
		}
	}
	for _, c := range r.s.checks {
		if err := c(r); err != nil {
			return err
		}
	}
	return nil
}

func (r *cellRun) checkState(s state, g *dexv1.GetSessionResponse) error {
	var errs []error
	if s.status != 0 && g.Session.Status != s.status {
		errs = append(errs, fmt.Errorf("the session is %s; want %s", fsm.StatusName(fsmpb.SessionStatus(g.Session.Status)), fsm.StatusName(fsmpb.SessionStatus(s.status))))
	}
	for _, c := range s.steps {
		n := 0
		for _, st := range g.Steps {
			if (c.kind == 0 || st.Kind == c.kind) && (c.tool == "" || st.Tool == c.tool) {
				n++
			}
		}
		if n != c.n {
			errs = append(errs, fmt.Errorf("%d %s; want %d: %s", n, named("Steps", kindName(c.kind), c.tool), c.n, describe(g.Steps)))
		}
	}
	for _, k := range s.waiting {
		st, err := oneStep(g, k, "")
		if err == nil && st.Status != stepWaiting {
			err = fmt.Errorf("%s is %s; want still waiting", fsm.KindName(fsmpb.StepKind(k)), st.Status)
		}
		errs = append(errs, err)
	}
	for _, c := range s.ledger {
		n, err := r.execs(r.id, func(x harness.LedgerEntry) bool {
			return (c.kind == "" || x.Kind == c.kind) && (c.tool == "" || x.Tool == c.tool)
		})
		if err != nil {
			return err
		}
		if !c.n.ok(n, 0) {
			errs = append(errs, fmt.Errorf("the ledger has %d %s; want %s", n, named("executions", c.kind, c.tool), c.n))
		}
	}
	if s.turns != 0 && g.Session.TurnsCompleted != uint64(s.turns) {
		errs = append(errs, fmt.Errorf("%d turns completed; want %d", g.Session.TurnsCompleted, s.turns))
	}
	if s.summaries != 0 {
		if n := countKind(g, dexv1.HistoryKind_HISTORY_KIND_SUMMARY); int(g.Session.Summaries) != s.summaries || n != s.summaries {
			errs = append(errs, fmt.Errorf("%d summaries (%d in the history); want exactly %d", g.Session.Summaries, n, s.summaries))
		}
	}
	if s.note != "" && !slices.ContainsFunc(g.Session.History, func(h *dexv1.HistoryEntry) bool {
		return h.Kind == dexv1.HistoryKind_HISTORY_KIND_NOTE && strings.Contains(h.Text, s.note)
	}) {
		errs = append(errs, fmt.Errorf("the history has no note naming %q", s.note))
	}
	return errors.Join(errs...)
}

func (r *cellRun) checkStep(x stepExpect) error {
	st, err := x.step.find(r)
	if err != nil {
		return err
	}
	outcome, attempts, execs := x.outcome, x.attempts, x.execs
	if !r.survives() {
		if x.killedOutcome != nil {
			outcome = x.killedOutcome
		}
		if x.killedAttempts != nil {
			attempts = x.killedAttempts
		}
		if x.killedExecs != nil {
			execs = x.killedExecs
		}
	}
	var errs []error
	if len(outcome) > 0 {
		errs = append(errs, outcomeIs(st, outcome...))
	}
	if attempts != nil {
		errs = append(errs, attemptsIn(st, attempts))
	}
	if !r.survives() {
		for i, p := range x.killedProgress {
			if i >= len(st.Attempts) || st.Attempts[i].Progress != p {
				errs = append(errs, fmt.Errorf("attempt %d of %s %s failed with progress other than %s: %s", i+1, fsm.KindName(fsmpb.StepKind(st.Kind)), st.Tool, p, describe([]*dexv1.Step{st})))
			}
		}
	}
	if x.told || x.toldText != "" {
		errs = append(errs, toldOnce(r.final, st))
		if tr := toolResults(r.final, st.CallId); x.toldText != "" && len(tr) == 1 && tr[0].Text != x.toldText {
			errs = append(errs, fmt.Errorf("the model is told %q for call %s; want %q", tr[0].Text, st.CallId, x.toldText))
		}
	}
	if x.sameKey {
		errs = append(errs, r.sameKey(r.id, st))
	}
	if x.prompt != "" && st.Prompt != x.prompt {
		errs = append(errs, fmt.Errorf("%s asks %q; want %q", fsm.KindName(fsmpb.StepKind(st.Kind)), st.Prompt, x.prompt))
	}
	// A wait (approval, answer, timer) runs nothing in a Worker: its
	// verdict sees 0 executions.
	if execs != nil || (x.verdict != nil && !isWait(st.Kind)) {
		n, err := r.runs(st)
		if err != nil {
			return err
		}
		if execs != nil && !execs.ok(n, len(st.Attempts)) {
			errs = append(errs, fmt.Errorf("%s %s ran %d times in %d attempts; want %s: %s", fsm.KindName(fsmpb.StepKind(st.Kind)), st.Tool, n, len(st.Attempts), execs, describe([]*dexv1.Step{st})))
		}
		if x.verdict != nil {
			errs = append(errs, x.verdict(r, st, n))
		}
	} else if x.verdict != nil {
		errs = append(errs, x.verdict(r, st, 0))
	}
	err = errors.Join(errs...)
	if err != nil && x.why != "" {
		err = fmt.Errorf("%s: %w", x.why, err)
	}
	return err
}

// runs counts a Step's executions in the ledger: a tool call's by its
// call id, a model call's, summary's or poll's by its Step.
func (r *cellRun) runs(st *dexv1.Step) (int, error) {
	switch st.Kind {
	case kindCallTool, kindSingle:
		return r.callExecs(r.id, st)
	case kindRunModel:
		return r.stepExecs(r.id, st, "model")
	case kindCompact:
		return r.stepExecs(r.id, st, "compact")
	case kindPoll:
		return r.stepExecs(r.id, st, "poll")
	}
	return 0, fmt.Errorf("a %s Step runs nothing in a Worker", fsm.KindName(fsmpb.StepKind(st.Kind)))
}

// named is "executions of model calc" or "Steps" for an error.
func named(what string, of ...string) string {
	var parts []string
	for _, p := range of {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return what
	}
	return what + " of " + strings.Join(parts, " ")
}

func kindName(k dexv1.StepKind) string {
	if k == 0 {
		return ""
	}
	return fsm.KindName(fsmpb.StepKind(k))
}

func isWait(k dexv1.StepKind) bool { return k == kindApproval || k == kindQuestion || k == kindTimer }

// ---- Steps a row names

// the is the only Step of kind (and tool) of the checked session.
func the(kind dexv1.StepKind, tool string) stepRef {
	return stepRef{name: named("the Step", kindName(kind), tool), moment: -1, find: func(r *cellRun) (*dexv1.Step, error) {
		return oneStep(r.final, kind, tool)
	}}
}

// caught is the Step caught at moment i.
func caught(i int) stepRef {
	return stepRef{name: fmt.Sprintf("the Step of moment %d", i+1), moment: i, find: func(r *cellRun) (*dexv1.Step, error) {
		if st := stepByID(r.final, r.caught[i]); st != nil {
			return st, nil
		}
		return nil, fmt.Errorf("the session has no Step %q, caught at %s", r.caught[i], r.s.at[i].what)
	}}
}

// ---- Moments

// firstHold: the Worker's first hold, of kind (0: any).
func firstHold(what string, kind dexv1.StepKind) moment {
	return moment{what: what, reach: func(r *cellRun) (string, error) {
		h, err := r.waitHeld()
		if err != nil {
			return "", err
		}
		if kind != 0 && !isKind(h, kind) {
			return "", fmt.Errorf("held %q; want %s", h.desc, what)
		}
		return h.Step, nil
	}}
}

// holdOf: the first hold of kind (0: any) and tool (""; any); the Worker
// is let go at every other.
func holdOf(what string, kind dexv1.StepKind, tool string) moment {
	return moment{what: what, reach: func(r *cellRun) (string, error) {
		h, err := r.holdUntil(what, func(h held) bool {
			return (kind == 0 || isKind(h, kind)) && (tool == "" || h.Tool == tool)
		})
		return h.Step, err
	}}
}

// nthHold: a hold of the nth Step of kind the Worker holds.
func nthHold(what string, kind dexv1.StepKind, nth int) moment {
	return moment{what: what, reach: func(r *cellRun) (string, error) {
		var seen []string
		h, err := r.holdUntil(what, func(h held) bool {
			if !isKind(h, kind) {
				return false
			}
			if !slices.Contains(seen, h.Step) {
				seen = append(seen, h.Step)
			}
			return len(seen) >= nth && h.Step == seen[nth-1]
		})
		return h.Step, err
	}}
}

// running: the ledger has an execution of kind ("": any) and tool ("":
// any) for the session: it runs now.
func running(what, kind, tool string) moment {
	return moment{what: what, reach: func(r *cellRun) (string, error) {
		x, err := r.waitLedger(what, func(x harness.LedgerEntry) bool {
			return x.Session == r.id && (kind == "" || x.Kind == kind) && (tool == "" || x.Tool == tool)
		})
		return x.Step, err
	}}
}

// reached: the session is in a state.
func reached(what string, cond func(*dexv1.GetSessionResponse) bool) moment {
	return moment{what: what, reach: func(r *cellRun) (string, error) {
		g, err := r.waitFor(r.id, what, waitShort, cond)
		r.at = g
		return "", err
	}}
}

// idleSession: the session answered and waits for a message.
func idleSession(what string) moment {
	return moment{what: what, reach: func(r *cellRun) (string, error) {
		g, err := r.waitIdle(r.id)
		r.at = g
		return "", err
	}}
}

// ---- Checks of one Step

// survives: the column leaves the Worker running, so its attempt may
// survive the fault.
func (e *cellEnv) survives() bool { return e.col != ColWorkerKill }

func isKind(h held, k dexv1.StepKind) bool { return h.Kind == k.String() }

func attemptsIn(st *dexv1.Step, c *count) error {
	if n := len(st.Attempts); !c.ok(n, n) {
		return fmt.Errorf("%s %s has %d attempts; want %s: %s", fsm.KindName(fsmpb.StepKind(st.Kind)), st.Tool, n, c, describe([]*dexv1.Step{st}))
	}
	for i, a := range st.Attempts {
		if int(a.N) != i+1 {
			return fmt.Errorf("%s %s: attempts numbered %v", fsm.KindName(fsmpb.StepKind(st.Kind)), st.Tool, describe([]*dexv1.Step{st}))
		}
	}
	return nil
}

func outcomeIs(st *dexv1.Step, want ...dexv1.Outcome) error {
	if slices.Contains(want, st.Outcome) {
		return nil
	}
	var names []string
	for _, o := range want {
		names = append(names, fsm.OutcomeName(fsmpb.Outcome(o)))
	}
	return fmt.Errorf("%s %s (call %s) recorded %s %q; want %s", fsm.KindName(fsmpb.StepKind(st.Kind)), st.Tool, st.CallId, fsm.OutcomeName(fsmpb.Outcome(st.Outcome)), st.Result, strings.Join(names, " or "))
}
