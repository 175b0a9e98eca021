package chaos

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Rows is the docs/crash-matrix.md table, in its order: each row says how
// a session reaches its moment and what must hold after the column's fault
// (the words: scenario_spec.go; the one scenario that plays them:
// scenario_run.go).
var Rows = []Row{
	// The tool-result RunModel of a turn whose tool already ran is struck
	// before the model answers. Under Worker kill it is struck at all three
	// attempts: the turn fails with a note not to repeat the tool, and the
	// cluster's error-resume then finishes the turn.
	{Step: "RunModel", Moment: "before any output reaches the cluster",
		Expected: "the model call runs again, at most 3 attempts within 30 minutes; then the turn fails. If tools already ran in the turn, a note in the history tells the next turn's model not to repeat them",
		scenario: scenario{message: "model", hold: holdAll("before-model"),
			at:        []moment{nthHold("the tool-result RunModel", kindRunModel, 2)},
			killEvery: 3,
			steps: []stepExpect{{step: caught(0),
				outcome: is(oSucceeded), attempts: between(1, 3), execs: survivor,
				killedOutcome: is(oFailed), killedAttempts: exactly(3), killedExecs: exactly(0),
				killedProgress: progress(pNotCompleted, pNotCompleted, pNotCompleted)}},
			final:  state{ledger: []ledgerCount{ran("", "lookup", exactly(1))}},
			killed: state{steps: []stepCount{runModels(3)}, note: "lookup"},
		}},
	// Under Worker kill the call may have been handed to the killed Worker
	// too (and may or may not have run there): a read runs again.
	{Step: "RunModel", Moment: "after output reached the cluster", Expected: "the same",
		scenario: scenario{message: "model", hold: holdOnce("after-result-sent"),
			at: []moment{firstHold("the first RunModel after its result was sent", kindRunModel)},
			steps: []stepExpect{
				{step: caught(0), outcome: is(oSucceeded), attempts: exactly(1), execs: exactly(1)},
				{step: the(kindCallTool, "lookup"), outcome: is(oSucceeded), execs: perAttempt},
			},
		}},
	{Step: "CallTool, idempotent write", Moment: "before the first heartbeat reaches the cluster", Expected: "runs again with the same idempotency key",
		scenario: scenario{message: "write", hold: holdAll("before-claim"),
			at: []moment{holdOf("save_note before its claim", 0, "save_note")},
			steps: []stepExpect{{step: the(kindCallTool, "save_note"), outcome: is(oSucceeded), told: true, sameKey: true,
				attempts: between(1, 3), execs: survivor,
				killedAttempts: exactly(2), killedProgress: progress(pNotStarted), killedExecs: exactly(1)}},
		}},
	{Step: "CallTool, idempotent write", Moment: "while the tool runs", Expected: "the same",
		scenario: scenario{message: "write-slow",
			at: []moment{running("save_note running", "", "save_note")},
			steps: []stepExpect{{step: the(kindCallTool, "save_note"), outcome: is(oSucceeded), told: true, sameKey: true,
				attempts: between(1, 3), execs: survivor,
				killedAttempts: exactly(2), killedProgress: progress(pNotCompleted), killedExecs: exactly(2)}},
		}},
	{Step: "CallTool, read", Moment: "while the tool runs", Expected: "runs again",
		scenario: scenario{message: "read-slow",
			at: []moment{running("lookup running", "", "lookup")},
			steps: []stepExpect{{step: the(kindCallTool, "lookup"), outcome: is(oSucceeded), told: true,
				attempts: between(1, 3), execs: perAttempt,
				killedAttempts: exactly(2), killedProgress: progress(pNotCompleted), killedExecs: exactly(2)}},
		}},
	// A read and a write whose every attempt fails; the fault strikes after
	// the first failed attempts.
	{Step: "CallTool", Moment: "every attempt fails", Expected: "after the last attempt a read records `failed`, a write records `outcome_unknown`",
		scenario: scenario{message: "fail-all",
			at: []moment{reached("attempt 1 of both calls failed", firstAttemptsFailed(2))},
			steps: []stepExpect{
				{step: the(kindCallTool, "lookup"), outcome: is(oFailed), attempts: exactly(3), told: true, execs: between(1, 3), verdict: ranResult},
				{step: the(kindCallTool, "save_note"), outcome: is(oUnknown), attempts: exactly(3), told: true, sameKey: true, execs: between(1, 3), verdict: ranResult},
			},
			final: state{steps: []stepCount{runModels(2)}},
		}},
	{Step: "CallSingleAttemptTool", Moment: "before the first heartbeat reaches the cluster",
		Expected: "records `outcome_unknown` (or `failed` with the not-run prefix, see docs/attempts.md) and does not run again; the model is told",
		scenario: scenario{message: "email", hold: holdAll("before-claim"),
			at: []moment{holdOf("send_email before its claim", 0, "send_email")},
			steps: []stepExpect{{step: the(kindSingle, "send_email"), attempts: exactly(1), told: true, execs: atMost(1), verdict: singleVerdict,
				killedOutcome: is(oFailed), killedExecs: exactly(0)}},
			final: state{steps: []stepCount{runModels(2)}},
		}},
	{Step: "CallSingleAttemptTool", Moment: "while the tool runs", Expected: "records `outcome_unknown`, never runs again",
		scenario: scenario{message: "email-slow",
			at: []moment{running("send_email running", "", "send_email")},
			steps: []stepExpect{{step: the(kindSingle, "send_email"), outcome: is(oSucceeded, oUnknown), attempts: exactly(1), told: true,
				execs: exactly(1), verdict: singleVerdict, killedOutcome: is(oUnknown)}},
			final: state{steps: []stepCount{runModels(2)}},
		}},
	{Step: "AwaitToolApproval", Moment: "while it waits", Expected: "nothing runs again; the wait lives in the cluster; a later approval runs the tool exactly once",
		scenario: scenario{message: "approve",
			at: []moment{reached("the approval waiting", waitingFor(kindApproval))},
			afterFault: state{waiting: []dexv1.StepKind{kindApproval}, steps: []stepCount{{kind: kindCallTool, tool: "deploy", n: 0}},
				ledger: []ledgerCount{ran("", "deploy", exactly(0))}},
			after: []hook{approve, approveAgain},
			steps: []stepExpect{{step: the(kindCallTool, "deploy"), outcome: is(oSucceeded), told: true, execs: exactly(1)}},
		}},
	{Step: "AwaitQuestionAnswer", Moment: "while it waits", Expected: "nothing runs again; a later answer resumes the turn",
		scenario: scenario{message: "ask",
			at:         []moment{reached("the question waiting", waitingFor(kindQuestion))},
			afterFault: state{waiting: []dexv1.StepKind{kindQuestion}, steps: []stepCount{runModels(1)}},
			after:      []hook{answer("eu-west"), answerAgain("us-east")},
			steps:      []stepExpect{{step: the(kindQuestion, ""), prompt: "which region?", toldText: "eu-west"}},
			final:      state{steps: []stepCount{runModels(2)}, ledger: []ledgerCount{modelCalls(2)}},
		}},
	// Under Server restart the timer comes due while every node is down.
	{Step: "AwaitTimer", Moment: "while it waits", Expected: "nothing runs again; the timer fires exactly once; one that came due during an outage fires when the cluster is back",
		scenario: scenario{message: "timer",
			at:       []moment{reached("the timer waiting", waitingFor(kindTimer))},
			downPast: kindTimer,
			steps:    []stepExpect{{step: the(kindTimer, ""), outcome: is(oSucceeded), told: true, verdict: firedOnTime}},
			final:    state{steps: []stepCount{runModels(2)}, ledger: []ledgerCount{modelCalls(2)}},
		}},
	{Step: "PollToolTask", Moment: "between two polls", Expected: "polling goes on with the same task; no second task starts",
		scenario: scenario{message: "build", workerArgs: []string{"--poll-interval", buildPollInterval},
			at:     []moment{reached("one poll done, the next waiting", betweenPolls)},
			checks: []hook{polledOneTask},
		}},
	{Step: "PollToolTask", Moment: "during a poll", Expected: "the poll runs again; no second task starts",
		scenario: scenario{message: "build", hold: holdOnce("during-poll"),
			at: []moment{firstHold("a poll", kindPoll)},
			steps: []stepExpect{{step: caught(0), outcome: is(oSucceeded), attempts: between(1, 3), execs: perAttempt,
				killedAttempts: exactly(2), killedProgress: progress(pNotCompleted)}},
			checks: []hook{polledOneTask},
		}},
	{Step: "CompactContext", Moment: "during the summary call",
		Expected: "only the summary call runs again, at most 3 attempts within 30 minutes; one summary stored; if all fail the turn fails and the next message compacts again",
		scenario: scenario{message: "compact", compacting: true,
			at: []moment{running("the summary call running", "compact", "")},
			steps: []stepExpect{{step: the(kindCompact, ""), outcome: is(oSucceeded), attempts: between(1, 3), execs: perAttempt,
				killedAttempts: exactly(2), killedProgress: progress(pNotCompleted), killedExecs: exactly(2)}},
			// Only the summary call may run again: the first turn's model
			// call and the one after the summary.
			final: state{summaries: 1, steps: []stepCount{runModels(2)}, ledger: []ledgerCount{modelCalls(2)}},
		}},
	{Step: "idle session", Moment: "waiting for a user message", Expected: "nothing runs again; the next message starts a turn",
		scenario: scenario{message: "idle",
			at:         []moment{idleSession("the first turn answered")},
			afterFault: state{status: dexv1.SessionStatus_SESSION_STATUS_IDLE, steps: []stepCount{{n: 1}}},
			after:      []hook{send("idle again", "after-the-fault")},
			final:      state{turns: 2, steps: []stepCount{runModels(2)}, ledger: []ledgerCount{modelCalls(2)}},
		}},
	// A Worker that runs one task at a time holds session A's RunModel, so
	// session B's waits in the queue, handed to no one, through the fault.
	{Step: "any Step", Moment: "queued, not yet handed to a Worker", Expected: "stays queued, uses no attempt, runs as attempt 1 when a Worker takes it",
		scenario: scenario{message: "idle A", workerArgs: []string{"--concurrency", "1"}, hold: holdOnce("before-model"),
			at:    []moment{firstHold("A's RunModel held", 0).beforeStrike(queueBehind("idle B"))},
			after: []hook{stillQueued},
			steps: []stepExpect{{step: the(kindRunModel, ""), outcome: is(oSucceeded), attempts: exactly(1), why: "the queued Step must run as attempt 1"}},
		}},
	// The summary call, a read and a poll, each struck before its claim.
	{Step: "any tool Step", Moment: "before the first heartbeat (read, poll, compaction too)", Expected: "as the rows above for that Step",
		scenario: scenario{message: "tools", compacting: true, workerArgs: []string{"--poll-interval", "200ms"}, hold: holdAll("before-claim"),
			at: []moment{
				holdOf("the summary call before its claim", kindCompact, ""),
				holdOf("the read before its claim", kindCallTool, "lookup").beforeStrike(buildStartEnded),
				holdOf("a poll before its claim", kindPoll, ""),
			},
			steps: []stepExpect{
				{step: the(kindCompact, ""), outcome: is(oSucceeded), attempts: between(1, 3), execs: perAttempt,
					killedAttempts: exactly(2), killedProgress: progress(pNotStarted)},
				{step: caught(1), outcome: is(oSucceeded), attempts: between(1, 3), told: true,
					killedAttempts: exactly(2), killedProgress: progress(pNotStarted), killedExecs: exactly(1)},
				{step: caught(2), outcome: is(oSucceeded), attempts: between(1, 3),
					killedAttempts: exactly(2), killedProgress: progress(pNotStarted)},
			},
			final:  state{summaries: 1},
			checks: []hook{polledOneTask},
		}},
	// The approval of a turn that also waits for an answer is committed;
	// the failpoint holds the node before it answers the caller, and the
	// fault strikes then. The command that resolves a wait moves the turn
	// on in the same entry, so there is no move left to run again. The
	// timer case: TestFailpoints_ACrashRightAfterATimerFiredRepeatsNothing.
	{Step: "any wait", Moment: "after the wait ended, while the state machine moves the turn on",
		Expected: "the move happens once, in the same committed command as the resolution; the resolved approval, answer or timer stays recorded once", Failpoint: "dexAfterWaitResolved",
		scenario: scenario{message: "waits",
			at:    []moment{reached("the approval and the question waiting", waitingFor(kindApproval, kindQuestion)).beforeStrike(approveIntoFailpoint)},
			after: []hook{approvalRetried, answer("eu-west")},
			steps: []stepExpect{
				{step: the(kindApproval, ""), outcome: is(oSucceeded)},
				// The approval dispatches deploy at once: a killed Worker may
				// already be running it, and an idempotent write repeats
				// with the same key.
				{step: the(kindCallTool, "deploy"), outcome: is(oSucceeded), told: true, execs: exactly(1),
					killedExecs: survivor, sameKey: true},
				{step: the(kindQuestion, ""), told: true},
			},
			// The waits' turn and one tool-result turn.
			final: state{steps: []stepCount{runModels(2)}},
		}},
	// The Worker's Complete of a write reaches the leader, which the
	// failpoint holds before it proposes the result; the fault strikes then.
	{Step: "any Step", Moment: "after the Worker sent its result, before the cluster committed it",
		Expected: "the result is committed, or the attempt fails and the row for that Step applies; never both", Failpoint: "dexBeforeCommitResult",
		scenario: scenario{message: "write", hold: holdOnce("tool-running"),
			at: []moment{firstHold("save_note held running", 0).beforeStrike(completeIntoFailpoint)},
			steps: []stepExpect{{step: the(kindCallTool, "save_note"), outcome: is(oSucceeded), told: true, sameKey: true,
				attempts: between(1, 3), execs: perAttempt, verdict: committedOnceByLast}},
		}},
	{Step: "inline tool", Moment: "while it runs", Expected: "it repeats with RunModel: at least once",
		scenario: scenario{message: "calc",
			at:     []moment{running("calc running inside RunModel", "inline", "")},
			steps:  []stepExpect{{step: the(kindRunModel, ""), outcome: is(oSucceeded), attempts: between(1, 3), killedAttempts: exactly(2)}},
			final:  state{ledger: []ledgerCount{ran("inline", "calc", atLeast(1))}},
			killed: state{ledger: []ledgerCount{ran("inline", "calc", atLeast(2))}},
			checks: []hook{inlineCalc},
		}},
	// The Claude Agent SDK adapter's query runs the CLI's own tools itself,
	// inside RunModel, and hands the deferred Dex tool back as a tool call.
	// The fault strikes while Bash runs, before Write, Edit and Task.
	{Step: "Claude Agent SDK turn segment", Moment: "while the CLI's own tool runs (Bash, Write, Edit, Task)",
		Expected: "the model calls and the CLI's own tools run again with RunModel: at least once; the history keeps only the committed output's results, inline; the tools in `dexTools` are deferred and become their own Steps, which follow their rows",
		Adapter:  "claude-agent-sdk",
		scenario: scenario{message: "cli",
			at: []moment{running("Bash running inside the query", "inline", "Bash")},
			steps: []stepExpect{
				{step: caught(0), outcome: is(oSucceeded), attempts: between(1, 3), execs: perAttempt, killedAttempts: exactly(2), killedExecs: exactly(2)},
				{step: the(kindCallTool, "save_note"), outcome: is(oSucceeded), attempts: exactly(1), told: true, sameKey: true, execs: exactly(1)},
			},
			final: state{steps: []stepCount{runModels(2)}, ledger: []ledgerCount{
				ran("inline", "Bash", atLeast(1)), ran("inline", "Write", atLeast(1)), ran("inline", "Edit", atLeast(1)), ran("inline", "Task", atLeast(1)),
			}},
			killed: state{ledger: []ledgerCount{ran("inline", "Bash", atLeast(2))}},
			checks: []hook{cliInline},
		}},
}
