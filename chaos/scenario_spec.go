package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/provider"
)

// The words the crash matrix's table (scenario_table.go) is written in: a
// row is a scenario value, which one generic runner (scenario_run.go) plays
// in every column.
//
// A Worker's attempt survives a server failure when the Worker reattaches
// within the heartbeat timeout; so under Server restart, Takeover and
// Leader pause a cell accepts the row's outcome or the attempt surviving
// and completing exactly once. Under Worker kill the row's rules apply:
// the killed* expectations.

// scenario is one row as data.
type scenario struct {
	// message is the session's first user message: it picks the scripted
	// turn (matrixScript). compacting: a first turn is answered, then the
	// message is sent long enough that its turn compacts first.
	message    string
	compacting bool
	// script: a certify row's model, served behind the providers' APIs
	// (nil: the demo Worker's matrixScript). policies: the tools whose
	// registered policy the row checks before any fault.
	script   *provider.Script
	policies []CertifyTool
	// workerArgs are flags of every Worker of the cell; hold, the first
	// Worker's hold flags, and a new Worker's while more strikes follow.
	workerArgs []string
	hold       []string
	// at are the moments struck, in order. Under Worker kill, the Step held
	// at the last one is struck again at each of its attempts up to
	// killEvery.
	at        []moment
	killEvery int
	// downPast: under Server restart, the cluster stays down until the
	// waiting Step of this kind (found at the moment) is past due.
	downPast dexv1.StepKind
	// afterFault holds right after the last fault; after is what the user
	// does then (approve, answer, send), before the Workers are let go.
	afterFault state
	after      []hook
	// Once every session settled: its Steps; the session in every column,
	// and under Worker kill killed too; then the row's own checks.
	steps  []stepExpect
	final  state
	killed state
	checks []hook
}

// hook is a row's own step: driving the session (an approval, an answer)
// or checking what the table's words do not say.
type hook func(r *cellRun) error

// verdict is a row's own check of one Step, given how often it ran.
type verdict func(r *cellRun, st *dexv1.Step, execs int) error

// moment is what a cell waits for before a strike.
type moment struct {
	what string
	// reach waits for the moment and returns the Step it caught ("" if
	// none).
	reach func(r *cellRun) (string, error)
	// before runs once the moment is reached (and the row's failpoint
	// armed), before the strike.
	before hook
}

// beforeStrike: once the moment is reached, h runs before the strike.
func (m moment) beforeStrike(h hook) moment {
	m.before = h
	return m
}

// stepExpect is what must hold of one Step once the session settled.
type stepExpect struct {
	step stepRef
	// In every column unless the killed* field of the same name is set:
	// that one replaces it under Worker kill.
	outcome        []dexv1.Outcome
	attempts       *count // how many attempts, numbered 1..n
	execs          *count // executions in the ledger (per call or Step)
	killedOutcome  []dexv1.Outcome
	killedAttempts *count
	killedExecs    *count
	// killedProgress: how attempts 1, 2, ... ended under Worker kill.
	killedProgress []dexv1.AttemptProgress
	told           bool   // the model is told the outcome exactly once
	toldText       string // ... with this text
	sameKey        bool   // every execution carried the Step's idempotency key
	prompt         string // the question asked
	verdict        verdict
	why            string // what a failure means, ahead of its error
}

// stepRef finds the Step a stepExpect is about.
type stepRef struct {
	name string
	find func(r *cellRun) (*dexv1.Step, error)
	// moment: caught(i) refers to moment i (-1: none).
	moment int
}

// state is what must hold of the checked session at one time.
type state struct {
	status  dexv1.SessionStatus // 0: any
	steps   []stepCount
	waiting []dexv1.StepKind // the one Step of each kind still waits
	ledger  []ledgerCount
	// turns completed: the session settles only once it has them.
	turns     int
	summaries int    // summaries stored (and in the history)
	note      string // a note in the history names this
}

func (s state) empty() bool {
	return s.status == 0 && len(s.steps) == 0 && len(s.waiting) == 0 && len(s.ledger) == 0 && s.turns == 0 && s.summaries == 0 && s.note == ""
}

// stepCount: exactly n Steps of a kind (0: any) and tool ("": any).
type stepCount struct {
	kind dexv1.StepKind
	tool string
	n    int
}

// ledgerCount: the executions in the ledger of a kind ("tool", "model",
// "inline", ...; "": any) and tool ("": any).
type ledgerCount struct {
	kind, tool string
	n          *count
}

// count bounds a number of attempts or executions.
type count struct {
	min, max   int  // max < 0: no bound
	perAttempt bool // at most one per attempt
	onceIfOne  bool // exactly one if there was one attempt
}

func exactly(n int) *count    { return &count{min: n, max: n} }
func atMost(n int) *count     { return &count{max: n} }
func atLeast(n int) *count    { return &count{min: n, max: -1} }
func between(a, b int) *count { return &count{min: a, max: b} }

var (
	// perAttempt: at least once, at most once per attempt.
	perAttempt = &count{min: 1, max: -1, perAttempt: true}
	// survivor: as perAttempt, and exactly once when one attempt did it
	// all: the attempt survived the fault and completed once.
	survivor = &count{min: 1, max: -1, perAttempt: true, onceIfOne: true}
)

func (c *count) ok(n, attempts int) bool {
	return n >= c.min && (c.max < 0 || n <= c.max) && (!c.perAttempt || n <= attempts) && (!c.onceIfOne || attempts != 1 || n == 1)
}

func (c *count) String() string {
	var s string
	switch {
	case c.min == c.max:
		s = fmt.Sprintf("exactly %d", c.min)
	case c.max < 0:
		s = fmt.Sprintf("at least %d", c.min)
	case c.min == 0:
		s = fmt.Sprintf("at most %d", c.max)
	default:
		s = fmt.Sprintf("%d..%d", c.min, c.max)
	}
	if c.perAttempt {
		s += ", at most once per attempt"
	}
	if c.onceIfOne {
		s += ", once if one attempt"
	}
	return s
}

// Words of the table.

func is(o ...dexv1.Outcome) []dexv1.Outcome { return o }

func progress(p ...dexv1.AttemptProgress) []dexv1.AttemptProgress { return p }

// holdOnce holds the first task at the moment; holdAll every one.
func holdOnce(moment string) []string { return []string{"--hold", moment} }
func holdAll(moment string) []string  { return []string{"--hold", moment, "--hold-all"} }

func runModels(n int) stepCount { return stepCount{kind: kindRunModel, n: n} }

func modelCalls(n int) ledgerCount { return ledgerCount{kind: "model", n: exactly(n)} }

// ran counts executions of a tool (any line kind) or of a kind of line.
func ran(kind, tool string, n *count) ledgerCount { return ledgerCount{kind: kind, tool: tool, n: n} }

// validate says what is wrong with a row's scenario, or nil.
func (s *scenario) validate() error {
	var errs []error
	if s.message == "" {
		errs = append(errs, errors.New("no message"))
	} else if s.script != nil {
		if err := s.script.Validate(); err != nil {
			errs = append(errs, err)
		}
	} else if err := scriptPicks(s.firstMessages()...); err != nil {
		errs = append(errs, err)
	}
	if len(s.at) == 0 {
		errs = append(errs, errors.New("no moment to strike at"))
	}
	for i, m := range s.at {
		if m.what == "" || m.reach == nil {
			errs = append(errs, fmt.Errorf("moment %d: no name or no way to reach it", i))
		}
	}
	for i, x := range s.steps {
		if x.step.find == nil {
			errs = append(errs, fmt.Errorf("step expectation %d names no Step", i))
		}
		if x.step.moment >= len(s.at) {
			errs = append(errs, fmt.Errorf("%s: the row has %d moments", x.step.name, len(s.at)))
		}
	}
	return errors.Join(errs...)
}

// firstMessages are the messages whose turns the scenario runs first.
func (s *scenario) firstMessages() []string {
	if s.compacting {
		return []string{"warm: " + s.message, compactMessage(s.message)}
	}
	return []string{s.message}
}

// scriptPicks checks each message picks a turn of matrixScript, as the
// scripted model matches it: the whole message, or its start.
func scriptPicks(msgs ...string) error {
	var script struct {
		Turns []struct {
			Match  string `json:"match"`
			Prefix bool   `json:"prefix"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(matrixScript), &script); err != nil {
		return fmt.Errorf("the matrix script: %w", err)
	}
next:
	for _, m := range msgs {
		for _, t := range script.Turns {
			if m == t.Match || (t.Prefix && strings.HasPrefix(m, t.Match)) {
				continue next
			}
		}
		return fmt.Errorf("message %q picks no turn of the matrix script", m)
	}
	return nil
}
