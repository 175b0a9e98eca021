package chaos

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
)

// One scenario per row of docs/crash-matrix.md. Each brings a session to the row's
// moment with a Worker, strikes with the column's fault (e.strike), recovers
// and checks what a user would check, from the ledger and GetSession.
//
// A Worker's attempt survives a server failure when the Worker reattaches
// within the heartbeat timeout; so under Server restart, Takeover and
// Leader pause a cell accepts the row's outcome or the attempt surviving
// and completing exactly once. Under Worker kill the row's rules apply.

const (
	kindRunModel = dexv1.StepKind_STEP_KIND_RUN_MODEL
	kindCallTool = dexv1.StepKind_STEP_KIND_CALL_TOOL
	kindSingle   = dexv1.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL
	kindApproval = dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL
	kindQuestion = dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER
	kindTimer    = dexv1.StepKind_STEP_KIND_AWAIT_TIMER
	kindPoll     = dexv1.StepKind_STEP_KIND_POLL_TOOL_TASK
	kindCompact  = dexv1.StepKind_STEP_KIND_COMPACT_CONTEXT

	oSucceeded = dexv1.Outcome_OUTCOME_SUCCEEDED
	oFailed    = dexv1.Outcome_OUTCOME_FAILED
	oUnknown   = dexv1.Outcome_OUTCOME_UNKNOWN

	pNotStarted   = dexv1.AttemptProgress_ATTEMPT_PROGRESS_NOT_STARTED
	pNotCompleted = dexv1.AttemptProgress_ATTEMPT_PROGRESS_NOT_COMPLETED
	aSucceeded    = dexv1.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED

	stepDone    = dexv1.StepStatus_STEP_STATUS_DONE
	stepQueued  = dexv1.StepStatus_STEP_STATUS_QUEUED
	stepWaiting = dexv1.StepStatus_STEP_STATUS_WAITING

	// toolSleep: how long a "while the tool runs" call runs, so the fault
	// lands inside it.
	toolSleep = 2500
	// buildPollInterval: the build tool's poll interval in the cells that
	// strike between two polls.
	buildPollInterval = "1500ms"
	// compactThreshold makes the first message of a compacting session
	// compact first.
	compactThreshold = 20
)

// matrixScript is the scripted model of every cell: the first user message
// of a session picks its turn.
var matrixScript = strings.NewReplacer("SLEEP", strconv.Itoa(toolSleep)).Replace(`{"turns": [
 {"match": "model", "outputs": [{"tool_calls": [{"tool": "lookup", "arguments": {"q": "m"}}]}, {"text": "looked it up"}]},
 {"match": "write", "outputs": [{"tool_calls": [{"tool": "save_note", "arguments": {"note": "n"}}]}, {"text": "saved"}]},
 {"match": "write-slow", "outputs": [{"tool_calls": [{"tool": "save_note", "arguments": {"note": "n", "sleep_ms": SLEEP}}]}, {"text": "saved"}]},
 {"match": "read-slow", "outputs": [{"tool_calls": [{"tool": "lookup", "arguments": {"q": "r", "sleep_ms": SLEEP}}]}, {"text": "found"}]},
 {"match": "fail-all", "outputs": [{"tool_calls": [{"tool": "lookup", "arguments": {"q": "f", "fail_attempts": 3}}, {"tool": "save_note", "arguments": {"note": "f", "fail_attempts": 3}}]}, {"text": "both failed"}]},
 {"match": "email", "outputs": [{"tool_calls": [{"tool": "send_email", "arguments": {"to": "a@b"}}]}, {"text": "mailed"}]},
 {"match": "email-slow", "outputs": [{"tool_calls": [{"tool": "send_email", "arguments": {"to": "a@b", "sleep_ms": SLEEP}}]}, {"text": "mailed"}]},
 {"match": "approve", "outputs": [{"tool_calls": [{"tool": "deploy", "arguments": {"env": "prod"}}]}, {"text": "deployed"}]},
 {"match": "ask", "outputs": [{"tool_calls": [{"tool": "ask_user", "arguments": {"question": "which region?"}}]}, {"text": "going to {{message}}"}]},
 {"match": "timer", "outputs": [{"tool_calls": [{"tool": "sleep", "arguments": {"seconds": 3}}]}, {"text": "slept"}]},
 {"match": "build", "outputs": [{"tool_calls": [{"tool": "build", "arguments": {"target": "app"}}]}, {"text": "built"}]},
 {"match": "warm", "prefix": true, "outputs": [{"text": "a first answer long enough to be worth a summary later"}]},
 {"match": "compact", "prefix": true, "outputs": [{"text": "answered after a summary"}]},
 {"match": "tools", "prefix": true, "outputs": [{"tool_calls": [{"tool": "lookup", "arguments": {"q": "t"}}, {"tool": "build", "arguments": {"target": "t"}}]}, {"text": "done"}]},
 {"match": "idle", "prefix": true, "outputs": [{"text": "hello"}]},
 {"match": "waits", "outputs": [{"tool_calls": [{"tool": "deploy", "arguments": {"env": "prod"}}, {"tool": "ask_user", "arguments": {"question": "which region?"}}]}, {"text": "deployed"}]},
 {"match": "calc", "outputs": [{"text": "2+2=4", "inline": [{"tool": "calc", "arguments": {"a": 2, "b": 2, "sleep_ms": SLEEP}}]}]}
],
 "compact": [{"text": "{{message}}", "delay_ms": SLEEP, "always": true}]}`)

// Rows is the docs/crash-matrix.md table, in its order.
var Rows = []Row{
	{Step: "RunModel", Moment: "before any output reaches the cluster",
		Expected: "the model call runs again, at most 3 attempts within 30 minutes; then the turn fails. If tools already ran in the turn, a note in the history tells the next turn's model not to repeat them",
		run:      rowModelBeforeOutput},
	{Step: "RunModel", Moment: "after output reached the cluster", Expected: "the same",
		run: rowModelAfterOutput},
	{Step: "CallTool, idempotent write", Moment: "before the first heartbeat reaches the cluster", Expected: "runs again with the same idempotency key",
		run: rowWriteBeforeHeartbeat},
	{Step: "CallTool, idempotent write", Moment: "while the tool runs", Expected: "the same",
		run: rowWriteWhileRuns},
	{Step: "CallTool, read", Moment: "while the tool runs", Expected: "runs again",
		run: rowReadWhileRuns},
	{Step: "CallTool", Moment: "every attempt fails", Expected: "after the last attempt a read records `failed`, a write records `outcome_unknown`",
		run: rowEveryAttemptFails},
	{Step: "CallSingleAttemptTool", Moment: "before the first heartbeat reaches the cluster",
		Expected: "records `outcome_unknown` (or `failed` with the not-run prefix, see docs/attempts.md) and does not run again; the model is told",
		run:      rowSingleBeforeHeartbeat},
	{Step: "CallSingleAttemptTool", Moment: "while the tool runs", Expected: "records `outcome_unknown`, never runs again",
		run: rowSingleWhileRuns},
	{Step: "AwaitToolApproval", Moment: "while it waits", Expected: "nothing runs again; the wait lives in the cluster; a later approval runs the tool exactly once",
		run: rowApproval},
	{Step: "AwaitQuestionAnswer", Moment: "while it waits", Expected: "nothing runs again; a later answer resumes the turn",
		run: rowQuestion},
	{Step: "AwaitTimer", Moment: "while it waits", Expected: "nothing runs again; the timer fires exactly once; one that came due during an outage fires when the cluster is back",
		run: rowTimer},
	{Step: "PollToolTask", Moment: "between two polls", Expected: "polling goes on with the same task; no second task starts",
		run: rowPollBetween},
	{Step: "PollToolTask", Moment: "during a poll", Expected: "the poll runs again; no second task starts",
		run: rowPollDuring},
	{Step: "CompactContext", Moment: "during the summary call",
		Expected: "only the summary call runs again, at most 3 attempts within 30 minutes; one summary stored; if all fail the turn fails and the next message compacts again",
		run:      rowCompaction},
	{Step: "idle session", Moment: "waiting for a user message", Expected: "nothing runs again; the next message starts a turn",
		run: rowIdle},
	{Step: "any Step", Moment: "queued, not yet handed to a Worker", Expected: "stays queued, uses no attempt, runs as attempt 1 when a Worker takes it",
		run: rowQueued},
	{Step: "any tool Step", Moment: "before the first heartbeat (read, poll, compaction too)", Expected: "as the rows above for that Step",
		run: rowAnyToolBeforeHeartbeat},
	{Step: "any wait", Moment: "after the wait ended, while the state machine moves the turn on",
		Expected: "the move runs again; the resolved approval, answer or timer stays recorded once", Failpoint: "dexAfterWaitResolved",
		run: rowWaitEnded},
	{Step: "any Step", Moment: "after the Worker sent its result, before the cluster committed it",
		Expected: "the result is committed, or the attempt fails and the row for that Step applies; never both", Failpoint: "dexBeforeCommitResult",
		run: rowResultBeforeCommit},
	{Step: "inline tool", Moment: "while it runs", Expected: "it repeats with RunModel: at least once",
		run: rowInline},
}

// survives: the column leaves the Worker running, so its attempt may
// survive the fault.
func (e *cellEnv) survives() bool { return e.col != ColWorkerKill }

func isKind(h held, k dexv1.StepKind) bool { return h.Kind == k.String() }

func attemptsCheck(st *dexv1.Step, min, max int) error {
	if n := len(st.Attempts); n < min || n > max {
		return fmt.Errorf("%s %s has %d attempts; want %d..%d: %s", fsm.KindName(st.Kind), st.Tool, n, min, max, describe([]*dexv1.Step{st}))
	}
	for i, a := range st.Attempts {
		if int(a.N) != i+1 {
			return fmt.Errorf("%s %s: attempts numbered %v", fsm.KindName(st.Kind), st.Tool, describe([]*dexv1.Step{st}))
		}
	}
	return nil
}

func outcomeIs(st *dexv1.Step, want ...dexv1.Outcome) error {
	for _, o := range want {
		if st.Outcome == o {
			return nil
		}
	}
	var names []string
	for _, o := range want {
		names = append(names, fsm.OutcomeName(o))
	}
	return fmt.Errorf("%s %s (call %s) recorded %s %q; want %s", fsm.KindName(st.Kind), st.Tool, st.CallId, fsm.OutcomeName(st.Outcome), st.Result, strings.Join(names, " or "))
}

func firstProgress(st *dexv1.Step, want dexv1.AttemptProgress) error {
	if len(st.Attempts) == 0 || st.Attempts[0].Progress != want {
		return fmt.Errorf("attempt 1 of %s %s failed with progress other than %s: %s", fsm.KindName(st.Kind), st.Tool, want, describe([]*dexv1.Step{st}))
	}
	return nil
}

func all(errs ...error) error { return errors.Join(errs...) }

// ---- RunModel

// The tool-result RunModel of a turn whose tool already ran is struck
// before the model answers. Under Worker kill it is struck three times: the
// turn fails after 3 attempts with a note not to repeat the tool, and the
// cluster's error-resume then finishes the turn.
func rowModelBeforeOutput(e *cellEnv) error {
	if _, err := e.startWorker("--hold", "before-model", "--hold-all"); err != nil {
		return err
	}
	id, err := e.createSession("model", 0)
	if err != nil {
		return err
	}
	first, err := e.waitHeld()
	if err != nil {
		return err
	}
	h, err := e.holdUntil("the tool-result RunModel", func(h held) bool { return isKind(h, kindRunModel) && h.Step != first.Step })
	if err != nil {
		return err
	}
	step := h.Step
	if !e.survives() {
		for n := 1; n <= 3; n++ {
			if n > 1 {
				if h, err = e.holdUntil(fmt.Sprintf("attempt %d of the RunModel", n), func(h held) bool { return h.Step == step && h.Attempt == n }); err != nil {
					return err
				}
			}
			next := []string{"--hold", "before-model", "--hold-all"}
			if n == 3 {
				next = nil
			}
			if err := e.strikeWith(strikeOpts{nextWorker: next}); err != nil {
				return err
			}
		}
		r, err := e.waitFor(id, "the RunModel failed after 3 attempts", waitLong, func(r *dexv1.GetSessionResponse) bool {
			st := stepByID(r, step)
			return st != nil && st.Status == stepDone
		})
		if err != nil {
			return err
		}
		st := stepByID(r, step)
		if err := all(outcomeIs(st, oFailed), attemptsCheck(st, 3, 3)); err != nil {
			return err
		}
		for _, a := range st.Attempts {
			if a.Progress != pNotCompleted {
				return fmt.Errorf("a killed RunModel attempt failed with %s: %s", a.Progress, describe([]*dexv1.Step{st}))
			}
		}
		var note bool
		for _, h := range r.Session.History {
			note = note || (h.Kind == dexv1.HistoryKind_HISTORY_KIND_NOTE && strings.Contains(h.Text, "lookup"))
		}
		if !note {
			return errors.New("the failed turn left no note naming the tool that already ran")
		}
	} else {
		if err := e.strike(); err != nil {
			return err
		}
		e.autoRelease()
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	st := stepByID(r, step)
	calls, err := e.stepExecs(id, st, "model")
	if err != nil {
		return err
	}
	lookups, err := e.execs(id, toolLine(id, "lookup"))
	if err != nil {
		return err
	}
	if lookups != 1 {
		return fmt.Errorf("lookup ran %d times; the turn's tool must run once", lookups)
	}
	if !e.survives() {
		if calls != 0 {
			return fmt.Errorf("the model ran %d times in attempts killed before the model call", calls)
		}
		if n := len(stepsBy(r, kindRunModel, "")); n != 3 {
			return fmt.Errorf("%d RunModel Steps; want the first, the failed one and the resumed one", n)
		}
		return nil
	}
	if err := all(outcomeIs(st, oSucceeded), attemptsCheck(st, 1, 3)); err != nil {
		return err
	}
	if calls < 1 || calls > len(st.Attempts) || (len(st.Attempts) == 1 && calls != 1) {
		return fmt.Errorf("the model ran %d times for %d attempts", calls, len(st.Attempts))
	}
	return nil
}

func rowModelAfterOutput(e *cellEnv) error {
	if _, err := e.startWorker("--hold", "after-result-sent"); err != nil {
		return err
	}
	id, err := e.createSession("model", 0)
	if err != nil {
		return err
	}
	h, err := e.waitHeld()
	if err != nil {
		return err
	}
	if !isKind(h, kindRunModel) {
		return fmt.Errorf("held %q; want the first RunModel after its result was sent", h.desc)
	}
	if err := e.strike(); err != nil {
		return err
	}
	if err := e.release(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	st := stepByID(r, h.Step)
	calls, err := e.stepExecs(id, st, "model")
	if err != nil {
		return err
	}
	if err := all(outcomeIs(st, oSucceeded), attemptsCheck(st, 1, 1)); err != nil {
		return err
	}
	if calls != 1 {
		return fmt.Errorf("the model ran %d times for an output the cluster had committed; want 1", calls)
	}
	look, err := oneStep(r, kindCallTool, "lookup")
	if err != nil {
		return err
	}
	n, err := e.callExecs(id, look)
	if err != nil {
		return err
	}
	// Under Worker kill the call may have been handed to the killed Worker
	// too (and may or may not have run there): a read runs again.
	if n < 1 || n > len(look.Attempts) || outcomeIs(look, oSucceeded) != nil {
		return fmt.Errorf("the committed output's tool call ran %d times: %s", n, describe([]*dexv1.Step{look}))
	}
	return nil
}

// ---- CallTool

// writeChecks: the write succeeded, every execution carried the Step's
// key; under Worker kill it took two attempts, the first with progress p.
func (e *cellEnv) writeChecks(id string, st *dexv1.Step, p dexv1.AttemptProgress, killedExecs int) error {
	if err := all(outcomeIs(st, oSucceeded), e.sameKey(id, st)); err != nil {
		return err
	}
	n, err := e.callExecs(id, st)
	if err != nil {
		return err
	}
	if !e.survives() {
		if err := all(attemptsCheck(st, 2, 2), firstProgress(st, p)); err != nil {
			return err
		}
		if n != killedExecs {
			return fmt.Errorf("%s ran %d times; want %d", st.Tool, n, killedExecs)
		}
		return nil
	}
	if err := attemptsCheck(st, 1, 3); err != nil {
		return err
	}
	if n < 1 || n > len(st.Attempts) || (len(st.Attempts) == 1 && n != 1) {
		return fmt.Errorf("%s ran %d times in %d attempts", st.Tool, n, len(st.Attempts))
	}
	return nil
}

func rowWriteBeforeHeartbeat(e *cellEnv) error {
	holds := []string{"--hold", "before-claim", "--hold-all"}
	if _, err := e.startWorker(holds...); err != nil {
		return err
	}
	id, err := e.createSession("write", 0)
	if err != nil {
		return err
	}
	if _, err := e.holdUntil("save_note before its claim", func(h held) bool { return h.Tool == "save_note" }); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	e.autoRelease()
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	st, err := oneStep(r, kindCallTool, "save_note")
	if err != nil {
		return err
	}
	return all(e.writeChecks(id, st, pNotStarted, 1), toldOnce(r, st))
}

func rowWriteWhileRuns(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("write-slow", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitLedger("save_note running", toolLine(id, "save_note")); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	st, err := oneStep(r, kindCallTool, "save_note")
	if err != nil {
		return err
	}
	return all(e.writeChecks(id, st, pNotCompleted, 2), toldOnce(r, st))
}

func rowReadWhileRuns(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("read-slow", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitLedger("lookup running", toolLine(id, "lookup")); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	st, err := oneStep(r, kindCallTool, "lookup")
	if err != nil {
		return err
	}
	n, err := e.callExecs(id, st)
	if err != nil {
		return err
	}
	if err := all(outcomeIs(st, oSucceeded), toldOnce(r, st)); err != nil {
		return err
	}
	if !e.survives() {
		if err := all(attemptsCheck(st, 2, 2), firstProgress(st, pNotCompleted)); err != nil {
			return err
		}
		if n != 2 {
			return fmt.Errorf("the read ran %d times; want again after the kill: 2", n)
		}
		return nil
	}
	if err := attemptsCheck(st, 1, 3); err != nil {
		return err
	}
	if n < 1 || n > len(st.Attempts) {
		return fmt.Errorf("the read ran %d times in %d attempts", n, len(st.Attempts))
	}
	return nil
}

// A read and a write whose every attempt fails; the fault strikes after
// the first failed attempts.
func rowEveryAttemptFails(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("fail-all", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitFor(id, "attempt 1 of both calls failed", waitShort, func(r *dexv1.GetSessionResponse) bool {
		n := 0
		for _, st := range stepsBy(r, kindCallTool, "") {
			if len(st.Attempts) >= 1 && st.Attempts[0].Status == dexv1.AttemptStatus_ATTEMPT_STATUS_FAILED {
				n++
			}
		}
		return n == 2
	}); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	read, err := oneStep(r, kindCallTool, "lookup")
	if err != nil {
		return err
	}
	write, err := oneStep(r, kindCallTool, "save_note")
	if err != nil {
		return err
	}
	if err := all(outcomeIs(read, oFailed), outcomeIs(write, oUnknown), attemptsCheck(read, 3, 3), attemptsCheck(write, 3, 3),
		toldOnce(r, read), toldOnce(r, write), e.sameKey(id, write)); err != nil {
		return err
	}
	for _, st := range []*dexv1.Step{read, write} {
		if strings.HasPrefix(st.Result, fsm.NotRunPrefix) {
			return fmt.Errorf("%s ran, yet its result says it did not: %q", st.Tool, st.Result)
		}
		n, err := e.callExecs(id, st)
		if err != nil {
			return err
		}
		if n < 1 || n > 3 {
			return fmt.Errorf("%s ran %d times in 3 attempts", st.Tool, n)
		}
	}
	if n := len(stepsBy(r, kindRunModel, "")); n != 2 {
		return fmt.Errorf("%d RunModel Steps; want the tool-result turn after the failures", n)
	}
	return nil
}

// ---- CallSingleAttemptTool

func (e *cellEnv) singleChecks(id string, r *dexv1.GetSessionResponse, killed dexv1.Outcome, killedExecs int) error {
	st, err := oneStep(r, kindSingle, "send_email")
	if err != nil {
		return err
	}
	n, err := e.callExecs(id, st)
	if err != nil {
		return err
	}
	if err := all(attemptsCheck(st, 1, 1), toldOnce(r, st)); err != nil {
		return err
	}
	if n > 1 {
		return fmt.Errorf("the single-attempt tool ran %d times", n)
	}
	if !e.survives() {
		if err := outcomeIs(st, killed); err != nil {
			return err
		}
		if n != killedExecs {
			return fmt.Errorf("the single-attempt tool ran %d times; want %d", n, killedExecs)
		}
	}
	notRun := strings.HasPrefix(st.Result, fsm.NotRunPrefix)
	switch {
	case st.Outcome == oSucceeded && n == 1:
	case st.Outcome == oFailed && notRun && n == 0:
	case st.Outcome == oUnknown && !notRun:
	default:
		return fmt.Errorf("send_email recorded %s %q after %d executions", fsm.OutcomeName(st.Outcome), st.Result, n)
	}
	if m := len(stepsBy(r, kindRunModel, "")); m != 2 {
		return fmt.Errorf("%d RunModel Steps; want the model told in a tool-result turn", m)
	}
	return nil
}

func rowSingleBeforeHeartbeat(e *cellEnv) error {
	if _, err := e.startWorker("--hold", "before-claim", "--hold-all"); err != nil {
		return err
	}
	id, err := e.createSession("email", 0)
	if err != nil {
		return err
	}
	if _, err := e.holdUntil("send_email before its claim", func(h held) bool { return h.Tool == "send_email" }); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	e.autoRelease()
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	return e.singleChecks(id, r, oFailed, 0)
}

func rowSingleWhileRuns(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("email-slow", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitLedger("send_email running", toolLine(id, "send_email")); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	if err := e.singleChecks(id, r, oUnknown, 1); err != nil {
		return err
	}
	st, _ := oneStep(r, kindSingle, "send_email")
	if n, _ := e.callExecs(id, st); n != 1 {
		return fmt.Errorf("send_email ran %d times; it ran once before the fault and must never run again", n)
	}
	if st.Outcome == oFailed {
		return fmt.Errorf("send_email ran, yet recorded %s %q", fsm.OutcomeName(st.Outcome), st.Result)
	}
	return nil
}

// ---- Waits

func rowApproval(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("approve", 0)
	if err != nil {
		return err
	}
	r, err := e.waitFor(id, "the approval waiting", waitShort, func(r *dexv1.GetSessionResponse) bool {
		s := stepsBy(r, kindApproval, "")
		return len(s) == 1 && s[0].Status == stepWaiting
	})
	if err != nil {
		return err
	}
	ap := stepsBy(r, kindApproval, "")[0]
	if err := e.strike(); err != nil {
		return err
	}
	if r, err = e.get(id); err != nil {
		return err
	}
	if st := stepByID(r, ap.Id); st.Status != stepWaiting || len(stepsBy(r, kindCallTool, "deploy")) != 0 {
		return fmt.Errorf("after the fault the approval is %s and deploy has %d Steps; want still waiting, none", st.Status, len(stepsBy(r, kindCallTool, "deploy")))
	}
	if n, err := e.execs(id, toolLine(id, "deploy")); err != nil || n != 0 {
		return fmt.Errorf("deploy ran %d times before the approval (%v)", n, err)
	}
	if err := e.retry("approve", func(ctx context.Context) error { return e.cl.ResolveApproval(ctx, ap.Id, true, "") }); err != nil {
		return err
	}
	if err := e.retry("approve again", func(ctx context.Context) error { return e.cl.ResolveApproval(ctx, ap.Id, true, "") }); status.Code(errors.Unwrap(err)) != codes.FailedPrecondition {
		return fmt.Errorf("a second approval: %v; want FailedPrecondition", err)
	}
	if r, err = e.waitIdle(id); err != nil {
		return err
	}
	dep, err := oneStep(r, kindCallTool, "deploy")
	if err != nil {
		return err
	}
	n, err := e.callExecs(id, dep)
	if err != nil {
		return err
	}
	if err := all(outcomeIs(dep, oSucceeded), toldOnce(r, dep)); err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("the approved deploy ran %d times; want exactly once", n)
	}
	return nil
}

func rowQuestion(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("ask", 0)
	if err != nil {
		return err
	}
	r, err := e.waitFor(id, "the question waiting", waitShort, func(r *dexv1.GetSessionResponse) bool {
		s := stepsBy(r, kindQuestion, "")
		return len(s) == 1 && s[0].Status == stepWaiting
	})
	if err != nil {
		return err
	}
	q := stepsBy(r, kindQuestion, "")[0]
	if q.Prompt != "which region?" {
		return fmt.Errorf("the question asks %q", q.Prompt)
	}
	if err := e.strike(); err != nil {
		return err
	}
	if r, err = e.get(id); err != nil {
		return err
	}
	if st := stepByID(r, q.Id); st.Status != stepWaiting || len(stepsBy(r, kindRunModel, "")) != 1 {
		return fmt.Errorf("after the fault: question %s, %d RunModel Steps; want waiting, 1", st.Status, len(stepsBy(r, kindRunModel, "")))
	}
	if err := e.retry("answer", func(ctx context.Context) error { return e.cl.AnswerQuestion(ctx, q.Id, "eu-west") }); err != nil {
		return err
	}
	if err := e.retry("answer again", func(ctx context.Context) error { return e.cl.AnswerQuestion(ctx, q.Id, "us-east") }); status.Code(errors.Unwrap(err)) != codes.FailedPrecondition {
		return fmt.Errorf("a second answer: %v; want FailedPrecondition", err)
	}
	if r, err = e.waitIdle(id); err != nil {
		return err
	}
	q = stepByID(r, q.Id)
	tr := toolResults(r, q.CallId)
	if len(tr) != 1 || tr[0].Text != "eu-west" {
		return fmt.Errorf("the answer is recorded %d times (%v); want once, eu-west", len(tr), tr)
	}
	models, err := e.execs(id, func(x LedgerEntry) bool { return x.Kind == "model" })
	if err != nil {
		return err
	}
	if n := len(stepsBy(r, kindRunModel, "")); n != 2 || models != 2 {
		return fmt.Errorf("%d RunModel Steps and %d model calls; want 2 and 2 (the question's turn and the answer's)", n, models)
	}
	return nil
}

var firedAt = regexp.MustCompile(`fired at (\S+)\)`)

func rowTimer(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("timer", 0)
	if err != nil {
		return err
	}
	r, err := e.waitFor(id, "the timer waiting", waitShort, func(r *dexv1.GetSessionResponse) bool {
		s := stepsBy(r, kindTimer, "")
		return len(s) == 1 && s[0].Status == stepWaiting
	})
	if err != nil {
		return err
	}
	tm := stepsBy(r, kindTimer, "")[0]
	due := time.UnixMilli(tm.DueAtMs)
	// Server restart: the timer comes due while every node is down.
	if err := e.strikeWith(strikeOpts{downUntil: due.Add(500 * time.Millisecond)}); err != nil {
		return err
	}
	back := time.Now()
	if r, err = e.waitIdle(id); err != nil {
		return err
	}
	tm = stepByID(r, tm.Id)
	if err := all(outcomeIs(tm, oSucceeded), toldOnce(r, tm)); err != nil {
		return err
	}
	m := firedAt.FindStringSubmatch(tm.Result)
	if m == nil {
		return fmt.Errorf("timer result %q names no firing time", tm.Result)
	}
	fired, perr := time.Parse(time.RFC3339Nano, m[1])
	if perr != nil {
		return fmt.Errorf("timer result %q: firing time: %v", tm.Result, perr)
	}
	at := fired.UnixMilli()
	if at < tm.DueAtMs {
		return fmt.Errorf("the timer fired at %d, before it was due at %d", at, tm.DueAtMs)
	}
	if e.col == ColServerRestart && at < back.Add(-time.Second).UnixMilli() {
		return fmt.Errorf("the timer fired at %d while every node was down (back at %d)", at, back.UnixMilli())
	}
	models, err := e.execs(id, func(x LedgerEntry) bool { return x.Kind == "model" })
	if err != nil {
		return err
	}
	if n := len(stepsBy(r, kindRunModel, "")); n != 2 || models != 2 {
		return fmt.Errorf("%d RunModel Steps and %d model calls; want 2 and 2", n, models)
	}
	return nil
}

// ---- PollToolTask

// pollChecks: one build started once; every poll polls its task.
func (e *cellEnv) pollChecks(id string, r *dexv1.GetSessionResponse) error {
	start, err := oneStep(r, kindCallTool, "build")
	if err != nil {
		return err
	}
	starts, err := e.callExecs(id, start)
	if err != nil {
		return err
	}
	if err := all(outcomeIs(start, oSucceeded), toldOnce(r, start)); err != nil {
		return err
	}
	// A start whose attempt never ran (NOT_STARTED) is not a second start.
	if starts != 1 {
		return fmt.Errorf("the build started %d times in %d attempts; want once: %s", starts, len(start.Attempts), describe([]*dexv1.Step{start}))
	}
	if start.TaskId == "" {
		return errors.New("the build's start recorded no task id")
	}
	polls := stepsBy(r, kindPoll, "build")
	if len(polls) < 2 {
		return fmt.Errorf("%d polls; want the task polled until done", len(polls))
	}
	for _, p := range polls {
		if p.TaskId != start.TaskId {
			return fmt.Errorf("poll %s polls task %q; the build started %q", p.Id, p.TaskId, start.TaskId)
		}
	}
	l, err := e.ledgerLines()
	if err != nil {
		return err
	}
	for _, x := range l {
		if x.Session == id && x.Kind == "poll" && x.TaskID != start.TaskId {
			return fmt.Errorf("a poll of task %q ran; the build started %q", x.TaskID, start.TaskId)
		}
	}
	if !strings.Contains(toolResults(r, start.CallId)[0].Text, "succeeded") {
		return fmt.Errorf("the build's result %q", toolResults(r, start.CallId)[0].Text)
	}
	return nil
}

func rowPollBetween(e *cellEnv) error {
	e.workerArgs = []string{"--poll-interval", buildPollInterval}
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("build", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitFor(id, "one poll done, the next waiting", waitShort, func(r *dexv1.GetSessionResponse) bool {
		p := stepsBy(r, kindPoll, "")
		return len(p) == 2 && p[0].Status == stepDone && p[1].Status == stepQueued && len(p[1].Attempts) == 0
	}); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	return e.pollChecks(id, r)
}

func rowPollDuring(e *cellEnv) error {
	if _, err := e.startWorker("--hold", "during-poll"); err != nil {
		return err
	}
	id, err := e.createSession("build", 0)
	if err != nil {
		return err
	}
	h, err := e.waitHeld()
	if err != nil {
		return err
	}
	if !isKind(h, kindPoll) {
		return fmt.Errorf("held %q; want a poll", h.desc)
	}
	if err := e.strike(); err != nil {
		return err
	}
	if err := e.release(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	if err := e.pollChecks(id, r); err != nil {
		return err
	}
	p := stepByID(r, h.Step)
	runs, err := e.stepExecs(id, p, "poll")
	if err != nil {
		return err
	}
	if err := all(outcomeIs(p, oSucceeded), attemptsCheck(p, 1, 3)); err != nil {
		return err
	}
	if !e.survives() {
		if err := all(attemptsCheck(p, 2, 2), firstProgress(p, pNotCompleted)); err != nil {
			return err
		}
	}
	if runs < 1 || runs > len(p.Attempts) {
		return fmt.Errorf("the struck poll ran %d times in %d attempts", runs, len(p.Attempts))
	}
	return nil
}

// ---- CompactContext

func compactMessage(prefix string) string {
	return prefix + ": " + strings.Repeat("a long message over the compaction threshold ", 2)
}

// compactingSession makes a session whose next turn compacts first: a first
// turn is answered (a compaction summarises the turns before the new
// message, never the message itself), then the long message is sent.
func (e *cellEnv) compactingSession(prefix string) (string, error) {
	// A Worker that holds at every moment is let go through the first turn;
	// the releaser stops before the message that compacts is sent.
	e.autoRelease()
	id, err := e.createSession("warm: "+prefix, compactThreshold)
	if err != nil {
		e.stopReleaser()
		return "", err
	}
	_, err = e.waitIdle(id)
	e.stopReleaser()
	if err != nil {
		return "", err
	}
	msg := compactMessage(prefix)
	err = e.retry("send the long message", func(ctx context.Context) error {
		_, err := e.cl.SendMessage(ctx, id, msg, id+"/long")
		return err
	})
	return id, err
}

func (e *cellEnv) compactChecks(id string, r *dexv1.GetSessionResponse, killedProgress dexv1.AttemptProgress) (*dexv1.Step, error) {
	st, err := oneStep(r, kindCompact, "")
	if err != nil {
		return nil, err
	}
	if r.Session.Summaries != 1 || countKind(r, dexv1.HistoryKind_HISTORY_KIND_SUMMARY) != 1 {
		return nil, fmt.Errorf("%d summaries (%d in the history); want exactly 1", r.Session.Summaries, countKind(r, dexv1.HistoryKind_HISTORY_KIND_SUMMARY))
	}
	if err := all(outcomeIs(st, oSucceeded), attemptsCheck(st, 1, 3)); err != nil {
		return nil, err
	}
	if !e.survives() {
		if err := all(attemptsCheck(st, 2, 2), firstProgress(st, killedProgress)); err != nil {
			return nil, err
		}
	}
	n, err := e.stepExecs(id, st, "compact")
	if err != nil {
		return nil, err
	}
	if n < 1 || n > len(st.Attempts) {
		return nil, fmt.Errorf("the summary call ran %d times in %d attempts", n, len(st.Attempts))
	}
	return st, nil
}

func rowCompaction(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.compactingSession("compact")
	if err != nil {
		return err
	}
	if _, err := e.waitLedger("the summary call running", func(x LedgerEntry) bool { return x.Session == id && x.Kind == "compact" }); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	st, err := e.compactChecks(id, r, pNotCompleted)
	if err != nil {
		return err
	}
	if !e.survives() {
		if n, _ := e.stepExecs(id, st, "compact"); n != 2 {
			return fmt.Errorf("the summary call ran %d times; want again after the kill: 2", n)
		}
	}
	models, err := e.execs(id, func(x LedgerEntry) bool { return x.Kind == "model" })
	if err != nil {
		return err
	}
	if n := len(stepsBy(r, kindRunModel, "")); n != 2 || models != 2 {
		return fmt.Errorf("%d RunModel Steps, %d model calls; want 2 and 2 (the first turn's and the one after the summary): only the summary call may run again", n, models)
	}
	return nil
}

// ---- Idle and queued

func rowIdle(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("idle", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitIdle(id); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	r, err := e.get(id)
	if err != nil {
		return err
	}
	if r.Session.Status != dexv1.SessionStatus_SESSION_STATUS_IDLE || len(r.Steps) != 1 {
		return fmt.Errorf("after the fault the session is %s with %d Steps; want idle with 1", fsm.StatusName(r.Session.Status), len(r.Steps))
	}
	if err := e.retry("send", func(ctx context.Context) error {
		_, err := e.cl.SendMessage(ctx, id, "idle again", "after-the-fault")
		return err
	}); err != nil {
		return err
	}
	r, err = e.waitFor(id, "the next turn done", waitLong, func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE && r.Session.TurnsCompleted >= 2
	})
	if err != nil {
		return err
	}
	models, err := e.execs(id, func(x LedgerEntry) bool { return x.Kind == "model" })
	if err != nil {
		return err
	}
	if n := len(stepsBy(r, kindRunModel, "")); n != 2 || models != 2 || r.Session.TurnsCompleted != 2 {
		return fmt.Errorf("%d RunModel Steps, %d model calls, %d turns; want 2, 2, 2", n, models, r.Session.TurnsCompleted)
	}
	return nil
}

// A Worker that runs one task at a time holds session A's RunModel, so
// session B's waits in the queue, handed to no one, through the fault.
func rowQueued(e *cellEnv) error {
	e.workerArgs = []string{"--concurrency", "1"}
	if _, err := e.startWorker("--hold", "before-model"); err != nil {
		return err
	}
	a, err := e.createSession("idle A", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitHeld(); err != nil {
		return err
	}
	b, err := e.createSession("idle B", 0)
	if err != nil {
		return err
	}
	r, err := e.get(b)
	if err != nil {
		return err
	}
	st, err := oneStep(r, kindRunModel, "")
	if err != nil {
		return err
	}
	if st.Status != stepQueued || len(st.Attempts) != 0 {
		return fmt.Errorf("B's RunModel is %s with %d attempts before the fault; want queued with none", st.Status, len(st.Attempts))
	}
	held := e.w
	if err := e.strike(); err != nil {
		return err
	}
	if r, err = e.get(b); err != nil {
		return err
	}
	// Still queued; under Worker kill the new Worker may have taken it
	// already, as attempt 1.
	got := stepByID(r, st.Id)
	taken := len(got.Attempts) == 1 && !e.survives() && got.Attempts[0].WorkerId != held.Name
	if !taken && (got.Status != stepQueued || len(got.Attempts) != 0) {
		return fmt.Errorf("after the fault B's RunModel is %s: %s; want still queued with no attempt", got.Status, describe([]*dexv1.Step{got}))
	}
	if err := e.release(); err != nil {
		return err
	}
	if _, err := e.waitIdle(a); err != nil {
		return err
	}
	if r, err = e.waitIdle(b); err != nil {
		return err
	}
	st = stepByID(r, st.Id)
	if err := all(outcomeIs(st, oSucceeded), attemptsCheck(st, 1, 1)); err != nil {
		return fmt.Errorf("the queued Step must run as attempt 1: %w", err)
	}
	return nil
}

// ---- Any tool Step before the first heartbeat: the summary call, a read
// and a poll, each struck before its claim.
func rowAnyToolBeforeHeartbeat(e *cellEnv) error {
	e.workerArgs = []string{"--poll-interval", "200ms"}
	holds := []string{"--hold", "before-claim", "--hold-all"}
	if _, err := e.startWorker(holds...); err != nil {
		return err
	}
	id, err := e.compactingSession("tools")
	if err != nil {
		return err
	}
	targets := []struct {
		what  string
		match func(held) bool
	}{
		{"the summary call", func(h held) bool { return isKind(h, kindCompact) }},
		{"the read", func(h held) bool { return isKind(h, kindCallTool) && h.Tool == "lookup" }},
		{"a poll", func(h held) bool { return isKind(h, kindPoll) }},
	}
	struck := map[string]string{} // what → Step
	for _, t := range targets {
		h, err := e.holdUntil(t.what+" before its claim", t.match)
		if err != nil {
			return err
		}
		struck[t.what] = h.Step
		// The long-running build's start may run beside the read, released
		// (it is not a target here): once claimed, let it end first, or a
		// strike that catches it mid-run repeats it, as an idempotent write
		// may, and the row's "the task started once" would blame the read's
		// fault.
		if t.what == "the read" {
			if _, err := e.waitFor(id, "the build's start ended before the strike", waitShort, func(r *dexv1.GetSessionResponse) bool {
				for _, st := range stepsBy(r, kindCallTool, "build") {
					n := len(st.Attempts)
					if st.Status != stepDone && n > 0 && st.Attempts[n-1].ClaimedAtMs != 0 {
						return false // claimed, so running: let it end
					}
				}
				return true
			}); err != nil {
				return err
			}
		}
		if err := e.strikeWith(strikeOpts{nextWorker: holds}); err != nil {
			return err
		}
		if e.survives() {
			if err := e.release(); err != nil {
				return err
			}
		}
	}
	e.autoRelease()
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	if _, err := e.compactChecks(id, r, pNotStarted); err != nil {
		return err
	}
	read := stepByID(r, struck["the read"])
	if err := all(outcomeIs(read, oSucceeded), attemptsCheck(read, 1, 3), toldOnce(r, read)); err != nil {
		return err
	}
	if !e.survives() {
		if err := all(attemptsCheck(read, 2, 2), firstProgress(read, pNotStarted)); err != nil {
			return err
		}
		if n, _ := e.callExecs(id, read); n != 1 {
			return fmt.Errorf("the read ran %d times; want once, in attempt 2", n)
		}
	}
	if err := e.pollChecks(id, r); err != nil {
		return err
	}
	p := stepByID(r, struck["a poll"])
	if err := all(outcomeIs(p, oSucceeded), attemptsCheck(p, 1, 3)); err != nil {
		return err
	}
	if !e.survives() {
		if err := all(attemptsCheck(p, 2, 2), firstProgress(p, pNotStarted)); err != nil {
			return err
		}
	}
	return nil
}

// ---- Failpoints

// The approval of a turn that also waits for an answer is committed; the
// failpoint holds the node before it answers the caller, and the fault
// strikes then.
func rowWaitEnded(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("waits", 0)
	if err != nil {
		return err
	}
	r, err := e.waitFor(id, "the approval and the question waiting", waitShort, func(r *dexv1.GetSessionResponse) bool {
		a, q := stepsBy(r, kindApproval, ""), stepsBy(r, kindQuestion, "")
		return len(a) == 1 && len(q) == 1 && a[0].Status == stepWaiting && q[0].Status == stepWaiting
	})
	if err != nil {
		return err
	}
	ap, q := stepsBy(r, kindApproval, "")[0], stepsBy(r, kindQuestion, "")[0]
	leader, err := e.armFailpoint("dexAfterWaitResolved", "sleep(6000)")
	if err != nil {
		return err
	}
	approved := make(chan error, 1)
	go func() {
		ctx, cancel := e.timeout(waitShort)
		defer cancel()
		approved <- e.cl.ResolveApproval(ctx, ap.Id, true, "")
	}()
	if _, err := e.waitFor(id, "the approval committed", waitShort, func(r *dexv1.GetSessionResponse) bool {
		return stepByID(r, ap.Id).Status == stepDone
	}); err != nil {
		return err
	}
	select {
	case err := <-approved:
		return fmt.Errorf("the approval answered (%v) before the fault; the failpoint did not hold it", err)
	default:
	}
	if err := e.strike(); err != nil {
		return err
	}
	_ = e.disarmFailpoint(leader, "dexAfterWaitResolved")
	if err := <-approved; err != nil {
		e.notef("the caller's approval: %v", err)
		// The caller retries: the approval is already recorded.
		if err := e.retry("approve again", func(ctx context.Context) error { return e.cl.ResolveApproval(ctx, ap.Id, true, "") }); status.Code(errors.Unwrap(err)) != codes.FailedPrecondition {
			return fmt.Errorf("the caller's retry of a committed approval: %v; want FailedPrecondition", err)
		}
	}
	if err := e.retry("answer", func(ctx context.Context) error { return e.cl.AnswerQuestion(ctx, q.Id, "eu-west") }); err != nil {
		return err
	}
	if r, err = e.waitIdle(id); err != nil {
		return err
	}
	ap = stepByID(r, ap.Id)
	if err := outcomeIs(ap, oSucceeded); err != nil {
		return err
	}
	dep, err := oneStep(r, kindCallTool, "deploy")
	if err != nil {
		return err
	}
	n, err := e.callExecs(id, dep)
	if err != nil {
		return err
	}
	if err := all(outcomeIs(dep, oSucceeded), toldOnce(r, dep), toldOnce(r, stepByID(r, q.Id))); err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("the approved deploy ran %d times; want once", n)
	}
	if m := len(stepsBy(r, kindRunModel, "")); m != 2 {
		return fmt.Errorf("%d RunModel Steps; want the waits' turn and one tool-result turn", m)
	}
	return nil
}

// The Worker's Complete of a write reaches the leader, which the failpoint
// holds before it proposes the result; the fault strikes then.
func rowResultBeforeCommit(e *cellEnv) error {
	if _, err := e.startWorker("--hold", "tool-running"); err != nil {
		return err
	}
	id, err := e.createSession("write", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitHeld(); err != nil {
		return err
	}
	leader, err := e.armFailpoint("dexBeforeCommitResult", "sleep(6000)")
	if err != nil {
		return err
	}
	before, err := e.fpCount(leader, "dexBeforeCommitResult")
	if err != nil {
		return err
	}
	if err := e.release(); err != nil {
		return err
	}
	if _, err := e.waitLedger("save_note ran", toolLine(id, "save_note")); err != nil {
		return err
	}
	// The tool answers at once; its Complete now sleeps in the failpoint.
	if err := e.waitFailpoint(leader, "dexBeforeCommitResult", before); err != nil {
		return err
	}
	if r, err := e.get(id); err != nil {
		return err
	} else if st, err := oneStep(r, kindCallTool, "save_note"); err != nil {
		return err
	} else if st.Status == stepDone {
		return fmt.Errorf("save_note's result was committed before the fault; the failpoint did not hold it")
	}
	if err := e.strike(); err != nil {
		return err
	}
	_ = e.disarmFailpoint(leader, "dexBeforeCommitResult")
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	st, err := oneStep(r, kindCallTool, "save_note")
	if err != nil {
		return err
	}
	if err := all(outcomeIs(st, oSucceeded), toldOnce(r, st), e.sameKey(id, st), attemptsCheck(st, 1, 3)); err != nil {
		return err
	}
	won := 0
	for _, a := range st.Attempts {
		if a.Status == aSucceeded {
			won++
		}
	}
	if won != 1 || st.Attempts[len(st.Attempts)-1].Status != aSucceeded {
		return fmt.Errorf("the result must be committed once, by the last attempt: %s", describe([]*dexv1.Step{st}))
	}
	n, err := e.callExecs(id, st)
	if err != nil {
		return err
	}
	if n < 1 || n > len(st.Attempts) {
		return fmt.Errorf("save_note ran %d times in %d attempts", n, len(st.Attempts))
	}
	if len(st.Attempts) == 1 {
		e.notef("the held result was committed")
	} else {
		e.notef("the held result was lost; attempt 1 failed and the write ran again")
	}
	return nil
}

// ---- Inline tool

func rowInline(e *cellEnv) error {
	if _, err := e.startWorker(); err != nil {
		return err
	}
	id, err := e.createSession("calc", 0)
	if err != nil {
		return err
	}
	if _, err := e.waitLedger("calc running inside RunModel", func(x LedgerEntry) bool { return x.Session == id && x.Kind == "inline" }); err != nil {
		return err
	}
	if err := e.strike(); err != nil {
		return err
	}
	r, err := e.waitIdle(id)
	if err != nil {
		return err
	}
	st, err := oneStep(r, kindRunModel, "")
	if err != nil {
		return err
	}
	if err := all(outcomeIs(st, oSucceeded), attemptsCheck(st, 1, 3)); err != nil {
		return err
	}
	var inline []*dexv1.InlineResult
	for _, h := range r.Session.History {
		inline = append(inline, h.InlineResults...)
	}
	if len(inline) != 1 || inline[0].Tool != "calc" || inline[0].Content != "4" {
		return fmt.Errorf("the history holds inline results %v; want the committed output's one calc = 4", inline)
	}
	runs, err := e.execs(id, func(x LedgerEntry) bool { return x.Kind == "inline" && x.Tool == "calc" })
	if err != nil {
		return err
	}
	if runs < 1 {
		return errors.New("calc never ran")
	}
	if !e.survives() {
		if err := attemptsCheck(st, 2, 2); err != nil {
			return err
		}
		if runs < 2 {
			return fmt.Errorf("calc ran %d times; it repeats with RunModel: want 2", runs)
		}
	}
	return nil
}
