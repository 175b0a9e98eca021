package chaos

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The few steps of the matrix's rows that are not the same for every row:
// setting up a compaction, acting on a wait, driving a call into a
// failpoint, and the checks the table's words do not say.

// ---- Sessions a row needs

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

// queueBehind: while a Worker that runs one task at a time holds the first
// session's RunModel, a second session's RunModel waits in the queue,
// handed to no one; the checks read that session.
func queueBehind(msg string) hook {
	return func(r *cellRun) error {
		b, err := r.createSession(msg, 0)
		if err != nil {
			return err
		}
		g, err := r.get(b)
		if err != nil {
			return err
		}
		st, err := oneStep(g, kindRunModel, "")
		if err != nil {
			return err
		}
		if st.Status != stepQueued || len(st.Attempts) != 0 {
			return fmt.Errorf("B's RunModel is %s with %d attempts before the fault; want queued with none", st.Status, len(st.Attempts))
		}
		r.id, r.queued, r.heldBy = b, st.Id, r.w.Name
		return nil
	}
}

// stillQueued: after the fault the queued Step is still queued; under
// Worker kill the new Worker may have taken it already, as attempt 1.
func stillQueued(r *cellRun) error {
	g, err := r.get(r.id)
	if err != nil {
		return err
	}
	got := stepByID(g, r.queued)
	taken := len(got.Attempts) == 1 && !r.survives() && got.Attempts[0].WorkerId != r.heldBy
	if !taken && (got.Status != stepQueued || len(got.Attempts) != 0) {
		return fmt.Errorf("after the fault B's RunModel is %s: %s; want still queued with no attempt", got.Status, describe([]*dexv1.Step{got}))
	}
	return nil
}

// ---- The user acts on a wait

// waitingStep is the Step of kind the moment found waiting.
func (r *cellRun) waitingStep(kind dexv1.StepKind) (*dexv1.Step, error) {
	if r.at != nil {
		if s := stepsBy(r.at, kind, ""); len(s) == 1 {
			return s[0], nil
		}
	}
	return nil, fmt.Errorf("the row's moment found no waiting %s", fsm.KindName(fsmpb.StepKind(kind)))
}

func approve(r *cellRun) error {
	ap, err := r.waitingStep(kindApproval)
	if err != nil {
		return err
	}
	return r.retry("approve", func(ctx context.Context) error { return r.cl.ResolveApproval(ctx, ap.Id, true, "") })
}

// approveAgain: a second approval is refused.
func approveAgain(r *cellRun) error {
	ap, err := r.waitingStep(kindApproval)
	if err != nil {
		return err
	}
	if err := r.retry("approve again", func(ctx context.Context) error { return r.cl.ResolveApproval(ctx, ap.Id, true, "") }); status.Code(errors.Unwrap(err)) != codes.FailedPrecondition {
		return fmt.Errorf("a second approval: %v; want FailedPrecondition", err)
	}
	return nil
}

func answer(text string) hook {
	return func(r *cellRun) error {
		q, err := r.waitingStep(kindQuestion)
		if err != nil {
			return err
		}
		return r.retry("answer", func(ctx context.Context) error { return r.cl.AnswerQuestion(ctx, q.Id, text) })
	}
}

// answerAgain: a second answer is refused.
func answerAgain(text string) hook {
	return func(r *cellRun) error {
		q, err := r.waitingStep(kindQuestion)
		if err != nil {
			return err
		}
		if err := r.retry("answer again", func(ctx context.Context) error { return r.cl.AnswerQuestion(ctx, q.Id, text) }); status.Code(errors.Unwrap(err)) != codes.FailedPrecondition {
			return fmt.Errorf("a second answer: %v; want FailedPrecondition", err)
		}
		return nil
	}
}

func send(msg, key string) hook {
	return func(r *cellRun) error {
		return r.retry("send", func(ctx context.Context) error {
			_, err := r.cl.SendMessage(ctx, r.id, msg, key)
			return err
		})
	}
}

// ---- Calls driven into the row's failpoint, which holds them on the
// leader while the fault strikes

// approveIntoFailpoint: the approval is committed; the failpoint holds the
// node before it answers the caller.
func approveIntoFailpoint(r *cellRun) error {
	ap, err := r.waitingStep(kindApproval)
	if err != nil {
		return err
	}
	r.pending = make(chan error, 1)
	go func(done chan<- error) {
		ctx, cancel := r.timeout(waitShort)
		defer cancel()
		done <- r.cl.ResolveApproval(ctx, ap.Id, true, "")
	}(r.pending)
	if _, err := r.waitFor(r.id, "the approval committed", waitShort, func(g *dexv1.GetSessionResponse) bool {
		return stepByID(g, ap.Id).Status == stepDone
	}); err != nil {
		return err
	}
	select {
	case err := <-r.pending:
		return fmt.Errorf("the approval answered (%v) before the fault; the failpoint did not hold it", err)
	default:
	}
	return nil
}

// approvalRetried: a caller whose approval failed in the fault retries it
// and is told it is already recorded.
func approvalRetried(r *cellRun) error {
	err := <-r.pending
	if err == nil {
		return nil
	}
	r.notef("the caller's approval: %v", err)
	ap, werr := r.waitingStep(kindApproval)
	if werr != nil {
		return werr
	}
	if err := r.retry("approve again", func(ctx context.Context) error { return r.cl.ResolveApproval(ctx, ap.Id, true, "") }); status.Code(errors.Unwrap(err)) != codes.FailedPrecondition {
		return fmt.Errorf("the caller's retry of a committed approval: %v; want FailedPrecondition", err)
	}
	return nil
}

// completeIntoFailpoint: the held write is let go; the tool answers at
// once and the Worker's Complete sleeps in the failpoint before the leader
// proposes the result.
func completeIntoFailpoint(r *cellRun) error {
	if err := r.release(); err != nil {
		return err
	}
	if _, err := r.waitLedger("save_note ran", toolLine(r.id, "save_note")); err != nil {
		return err
	}
	if err := r.waitFailpoint(r.fp, r.cell.Row.Failpoint, r.fpBefore); err != nil {
		return err
	}
	g, err := r.get(r.id)
	if err != nil {
		return err
	}
	st, err := oneStep(g, kindCallTool, "save_note")
	if err != nil {
		return err
	}
	if st.Status == stepDone {
		return fmt.Errorf("save_note's result was committed before the fault; the failpoint did not hold it")
	}
	return nil
}

// buildStartEnded: the long-running build's start may run beside the read,
// released (it is not a target): once claimed, let it end first, or a
// strike that catches it mid-run repeats it, as an idempotent write may,
// and the row's "the task started once" would blame the read's fault.
func buildStartEnded(r *cellRun) error {
	_, err := r.waitFor(r.id, "the build's start ended before the strike", waitShort, func(g *dexv1.GetSessionResponse) bool {
		for _, st := range stepsBy(g, kindCallTool, "build") {
			n := len(st.Attempts)
			if st.Status != stepDone && n > 0 && st.Attempts[n-1].ClaimedAtMs != 0 {
				return false // claimed, so running: let it end
			}
		}
		return true
	})
	return err
}

// ---- Session states a moment waits for

// waitingFor: one Step of each kind, waiting.
func waitingFor(kinds ...dexv1.StepKind) func(*dexv1.GetSessionResponse) bool {
	return func(g *dexv1.GetSessionResponse) bool {
		for _, k := range kinds {
			s := stepsBy(g, k, "")
			if len(s) != 1 || s[0].Status != stepWaiting {
				return false
			}
		}
		return true
	}
}

// firstAttemptsFailed: attempt 1 of n tool calls failed.
func firstAttemptsFailed(n int) func(*dexv1.GetSessionResponse) bool {
	return func(g *dexv1.GetSessionResponse) bool {
		failed := 0
		for _, st := range stepsBy(g, kindCallTool, "") {
			if len(st.Attempts) >= 1 && st.Attempts[0].Status == dexv1.AttemptStatus_ATTEMPT_STATUS_FAILED {
				failed++
			}
		}
		return failed == n
	}
}

// betweenPolls: one poll done, the next queued and not handed out.
func betweenPolls(g *dexv1.GetSessionResponse) bool {
	p := stepsBy(g, kindPoll, "")
	return len(p) == 2 && p[0].Status == stepDone && p[1].Status == stepQueued && len(p[1].Attempts) == 0
}

// ---- Checks of one Step

// singleVerdict: a single-attempt tool's outcome says what happened: it
// succeeded once, or failed never run (the not-run prefix), or its outcome
// is unknown.
func singleVerdict(_ *cellRun, st *dexv1.Step, n int) error {
	notRun := strings.HasPrefix(st.Result, fsm.NotRunPrefix)
	switch {
	case st.Outcome == oSucceeded && n == 1:
	case st.Outcome == oFailed && notRun && n == 0:
	case st.Outcome == oUnknown && !notRun:
	default:
		return fmt.Errorf("%s recorded %s %q after %d executions", st.Tool, fsm.OutcomeName(fsmpb.Outcome(st.Outcome)), st.Result, n)
	}
	return nil
}

// ranResult: a call that ran does not say it did not.
func ranResult(_ *cellRun, st *dexv1.Step, _ int) error {
	if strings.HasPrefix(st.Result, fsm.NotRunPrefix) {
		return fmt.Errorf("%s ran, yet its result says it did not: %q", st.Tool, st.Result)
	}
	return nil
}

// committedOnceByLast: the result is committed once, by the last attempt:
// the held result, or the write run again after it was lost.
func committedOnceByLast(r *cellRun, st *dexv1.Step, _ int) error {
	won := 0
	for _, a := range st.Attempts {
		if a.Status == aSucceeded {
			won++
		}
	}
	if won != 1 || st.Attempts[len(st.Attempts)-1].Status != aSucceeded {
		return fmt.Errorf("the result must be committed once, by the last attempt: %s", describe([]*dexv1.Step{st}))
	}
	if len(st.Attempts) == 1 {
		r.notef("the held result was committed")
	} else {
		r.notef("the held result was lost; attempt 1 failed and the write ran again")
	}
	return nil
}

var firedAt = regexp.MustCompile(`fired at (\S+)\)`)

// firedOnTime: the timer fired once it was due, and not while every node
// was down.
func firedOnTime(r *cellRun, tm *dexv1.Step, _ int) error {
	m := firedAt.FindStringSubmatch(tm.Result)
	if m == nil {
		return fmt.Errorf("timer result %q names no firing time", tm.Result)
	}
	fired, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		return fmt.Errorf("timer result %q: firing time: %v", tm.Result, err)
	}
	at := fired.UnixMilli()
	if at < tm.DueAtMs {
		return fmt.Errorf("the timer fired at %d, before it was due at %d", at, tm.DueAtMs)
	}
	if r.col == ColServerRestart && at < r.back.Add(-time.Second).UnixMilli() {
		return fmt.Errorf("the timer fired at %d while every node was down (back at %d)", at, r.back.UnixMilli())
	}
	return nil
}

// ---- Checks of the session

// polledOneTask: one build started once; every poll polls its task.
func polledOneTask(r *cellRun) error {
	g := r.final
	start, err := oneStep(g, kindCallTool, "build")
	if err != nil {
		return err
	}
	starts, err := r.callExecs(r.id, start)
	if err != nil {
		return err
	}
	if err := errors.Join(outcomeIs(start, oSucceeded), toldOnce(g, start)); err != nil {
		return err
	}
	// A start whose attempt never ran (NOT_STARTED) is not a second start.
	if starts != 1 {
		return fmt.Errorf("the build started %d times in %d attempts; want once: %s", starts, len(start.Attempts), describe([]*dexv1.Step{start}))
	}
	if start.TaskId == "" {
		return errors.New("the build's start recorded no task id")
	}
	polls := stepsBy(g, kindPoll, "build")
	if len(polls) < 2 {
		return fmt.Errorf("%d polls; want the task polled until done", len(polls))
	}
	for _, p := range polls {
		if p.TaskId != start.TaskId {
			return fmt.Errorf("poll %s polls task %q; the build started %q", p.Id, p.TaskId, start.TaskId)
		}
	}
	l, err := r.ledgerLines()
	if err != nil {
		return err
	}
	for _, x := range l {
		if x.Session == r.id && x.Kind == "poll" && x.TaskID != start.TaskId {
			return fmt.Errorf("a poll of task %q ran; the build started %q", x.TaskID, start.TaskId)
		}
	}
	if !strings.Contains(toolResults(g, start.CallId)[0].Text, "succeeded") {
		return fmt.Errorf("the build's result %q", toolResults(g, start.CallId)[0].Text)
	}
	return nil
}

// inlineCalc: the history holds the committed output's one inline result.
func inlineCalc(r *cellRun) error {
	var inline []*dexv1.InlineResult
	for _, h := range r.final.Session.History {
		inline = append(inline, h.InlineResults...)
	}
	if len(inline) != 1 || inline[0].Tool != "calc" || inline[0].Content != "4" {
		return fmt.Errorf("the history holds inline results %v; want the committed output's one calc = 4", inline)
	}
	return nil
}

// cliInline: the committed output holds the CLI's own tools as inline
// results, once each and in order, and the deferred save_note as its one
// tool call.
func cliInline(r *cellRun) error {
	var inline, calls []string
	for _, h := range r.final.Session.History {
		for _, x := range h.InlineResults {
			inline = append(inline, x.Tool+"="+x.Content)
		}
		for _, c := range h.ToolCalls {
			calls = append(calls, c.Tool)
		}
	}
	want := []string{"Bash=Bash done", "Write=Write done", "Edit=Edit done", "Task=Task done"}
	if !slices.Equal(inline, want) || !slices.Equal(calls, []string{"save_note"}) {
		return fmt.Errorf("the history holds inline results %v and tool calls %v; want %v and [save_note]", inline, calls, want)
	}
	return nil
}
