package chaos

import (
	"encoding/json"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/provider"
)

// The rows dexchaos certify runs against a user's Worker: the crash
// matrix's rows whose outcome the user's code decides (its model handler,
// its tools and their policies), written in the matrix's words and played
// by the same scenario. The moments are reached through the Worker
// library's own holds ($DEX_HOLD); "while the tool runs" is held right
// after the handler returned, before its result is sent: the tool's effect
// happened and the cluster does not know it, the worst moment for a repeat.

// Tool policies as a tools file names them.
const (
	PolicyRead            = "read"
	PolicyIdempotentWrite = "idempotent_write"
	PolicySingleAttempt   = "single_attempt"
)

// certifyAnswer is the message of the rows about the model alone.
const certifyAnswer = "certify: answer with text"

// CertifyRows are the rows for tools, in report order: the model's, then
// each tool's by its policy, then the idle session.
func CertifyRows(tools []CertifyTool) []Row {
	rows := []Row{
		{Step: "RunModel", Moment: "before any output reaches the cluster",
			Expected: "the model call runs again; the turn completes once",
			scenario: scenario{message: certifyAnswer, script: answerScript(), hold: holdOnce("before-model"),
				at: []moment{firstHold("the RunModel before its handler", kindRunModel)},
				steps: []stepExpect{{step: caught(0), outcome: is(oSucceeded), attempts: between(1, 3), execs: survivor,
					killedAttempts: exactly(2), killedProgress: progress(pNotCompleted), killedExecs: exactly(1),
					why: "your model handler"}},
				final: state{turns: 1, steps: []stepCount{runModels(1)}},
			}},
		{Step: "RunModel", Moment: "after output reached the cluster",
			Expected: "the model call never runs again",
			scenario: scenario{message: certifyAnswer, script: answerScript(), hold: holdOnce("after-result-sent"),
				at: []moment{firstHold("the RunModel after its result was sent", kindRunModel)},
				steps: []stepExpect{{step: caught(0), outcome: is(oSucceeded), attempts: exactly(1), execs: exactly(1),
					why: "a committed model output must not be asked for again"}},
				final: state{turns: 1, steps: []stepCount{runModels(1)}},
			}},
	}
	for _, t := range tools {
		rows = append(rows, toolRows(t)...)
	}
	return append(rows, Row{Step: "idle session", Moment: "waiting for a user message",
		Expected: "nothing runs again; the next message starts a turn",
		scenario: scenario{message: certifyAnswer, script: answerScript(),
			at:         []moment{idleSession("the first turn answered")},
			afterFault: state{status: dexv1.SessionStatus_SESSION_STATUS_IDLE, steps: []stepCount{{n: 1}}},
			after:      []hook{send(certifyAnswer+" again", "after-the-fault")},
			final:      state{turns: 2, steps: []stepCount{runModels(2)}, ledger: []ledgerCount{modelCalls(2)}},
		}})
}

// toolRows: the tool struck before its claim and right after it ran.
func toolRows(t CertifyTool) []Row {
	msg := "certify: call " + t.Name
	s := func(hold []string, at moment, x stepExpect) scenario {
		return scenario{message: msg, script: toolScript(msg, t), hold: hold, at: []moment{at},
			policies: []CertifyTool{t}, steps: []stepExpect{x}, final: state{steps: []stepCount{runModels(2)}}}
	}
	switch t.Policy {
	case PolicySingleAttempt:
		return []Row{
			{Step: "CallSingleAttemptTool `" + t.Name + "`", Moment: "before the first heartbeat reaches the cluster",
				Expected: "records `outcome_unknown` (or `failed` with the not-run prefix) and does not run again; the model is told",
				scenario: s(holdAll("before-claim"), holdOf(t.Name+" before its claim", kindSingle, t.Name),
					stepExpect{step: the(kindSingle, t.Name), attempts: exactly(1), told: true, execs: atMost(1), verdict: singleVerdict,
						killedOutcome: is(oFailed), killedExecs: exactly(0)})},
			{Step: "CallSingleAttemptTool `" + t.Name + "`", Moment: "while the tool runs (it ran; its result not sent)",
				Expected: "records `outcome_unknown`, never runs again",
				scenario: s(holdAll("before-result"), holdOf(t.Name+" ran, its result not sent", kindSingle, t.Name),
					stepExpect{step: the(kindSingle, t.Name), outcome: is(oSucceeded, oUnknown), attempts: exactly(1), told: true,
						execs: exactly(1), verdict: singleVerdict, killedOutcome: is(oUnknown)})},
		}
	default:
		step := "CallTool, read `" + t.Name + "`"
		var keyed verdict
		if t.Policy == PolicyIdempotentWrite {
			step, keyed = "CallTool, idempotent write `"+t.Name+"`", keyUsed
		}
		return []Row{
			{Step: step, Moment: "before the first heartbeat reaches the cluster", Expected: runsAgain(t),
				scenario: s(holdAll("before-claim"), holdOf(t.Name+" before its claim", kindCallTool, t.Name),
					stepExpect{step: the(kindCallTool, t.Name), outcome: is(oSucceeded), told: true, sameKey: keyed != nil, verdict: keyed,
						attempts: between(1, 3), execs: survivor,
						killedAttempts: exactly(2), killedProgress: progress(pNotStarted), killedExecs: exactly(1)})},
			{Step: step, Moment: "while the tool runs (it ran; its result not sent)", Expected: runsAgain(t),
				scenario: s(holdAll("before-result"), holdOf(t.Name+" ran, its result not sent", kindCallTool, t.Name),
					stepExpect{step: the(kindCallTool, t.Name), outcome: is(oSucceeded), told: true, sameKey: keyed != nil, verdict: keyed,
						attempts: between(1, 3), execs: perAttempt,
						killedAttempts: exactly(2), killedProgress: progress(pNotCompleted), killedExecs: exactly(2)})},
		}
	}
}

func runsAgain(t CertifyTool) string {
	if t.Policy == PolicyIdempotentWrite {
		return "runs again with the same idempotency key"
	}
	return "runs again"
}

// answerScript answers every message with text.
func answerScript() *provider.Script {
	return &provider.Script{Turns: []provider.Turn{{Contains: certifyAnswer, Outputs: []provider.Output{{Text: "Certified answer."}}}}}
}

// toolScript: the first model call asks for the tool with the file's
// arguments, the next answers with text.
func toolScript(msg string, t CertifyTool) *provider.Script {
	args := t.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	return &provider.Script{Turns: []provider.Turn{{Contains: msg, Outputs: []provider.Output{
		{ToolCalls: []provider.ToolCall{{Name: t.Name, Arguments: args}}},
		{Text: "Done."},
	}}}}
}
