package chaos

import (
	"strconv"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The scripted model every cell of the crash matrix runs, and the names the
// rows (scenario_table.go) are written with.

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
// of a session picks its turn. The "cli" turn calls the Claude Code CLI's
// own tools (Bash, Write, Edit, Task), which only the Claude Agent SDK
// adapter's fake CLI runs, inside the query.
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
 {"match": "calc", "outputs": [{"text": "2+2=4", "inline": [{"tool": "calc", "arguments": {"a": 2, "b": 2, "sleep_ms": SLEEP}}]}]},
 {"match": "cli", "outputs": [{"text": "built, wrote, edited, reviewed", "tool_calls": [{"tool": "Bash", "arguments": {"command": "make", "sleep_ms": SLEEP}}, {"tool": "Write", "arguments": {"file_path": "notes.md", "content": "n"}}, {"tool": "Edit", "arguments": {"file_path": "notes.md", "old_string": "n", "new_string": "m"}}, {"tool": "Task", "arguments": {"description": "review", "prompt": "review notes.md"}}, {"tool": "save_note", "arguments": {"note": "n"}}]}, {"text": "saved"}]}
],
 "compact": [{"text": "{{message}}", "delay_ms": SLEEP, "always": true}]}`)
