package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Demo tools, one per policy. Every execution appends a ledger line before
// it does anything else. Arguments every tool understands (for tests):
//
//	"sleep_ms": N        run this long (cancellable)
//	"fail_attempts": N   attempts 1..N fail (reported as a failure, the Step is retried)
//	"error_result": true the tool answers with an error result
//	"result_bytes": N    the result is N bytes long (its answer word, then filler)
type demoTools struct {
	ledger *Ledger
	worker string
	// pollInterval of the build tool (default 200 ms).
	pollInterval time.Duration
	// runTimeouts registers a run timeout with these tools' policies.
	runTimeouts map[string]time.Duration

	mu    sync.Mutex
	polls map[string]int // long-running task id → polls so far
}

// buildPollsRunning is how many polls of a build report "running".
const buildPollsRunning = 2

type toolArgs struct {
	SleepMs      int  `json:"sleep_ms"`
	FailAttempts int  `json:"fail_attempts"`
	ErrorResult  bool `json:"error_result"`
	ResultBytes  int  `json:"result_bytes"`
}

func (d *demoTools) tools() []client.Tool {
	spec := func(name string, access dexv1.ToolAccess, desc string) *dexv1.ToolSpec {
		return &dexv1.ToolSpec{Name: name, Access: access, Description: desc}
	}
	deploy := spec("deploy", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, "Deploys a service; needs approval.")
	deploy.NeedsApproval = true
	build := spec("build", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, "Starts a build and returns its task id; polled until done.")
	build.LongRunning = true
	build.PollIntervalMs = 200
	if d.pollInterval > 0 {
		build.PollIntervalMs = uint32(d.pollInterval.Milliseconds())
	}
	calc := spec("calc", dexv1.ToolAccess_TOOL_ACCESS_READ, "Adds, subtracts or multiplies two numbers; inline: runs inside the model call.")
	calc.Inline = true
	tools := []client.Tool{
		{Spec: spec("lookup", dexv1.ToolAccess_TOOL_ACCESS_READ, "Looks something up."), Run: d.simple("found")},
		{Spec: spec("save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, "Saves a note."), Run: d.simple("saved")},
		{Spec: spec("send_email", dexv1.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT, "Sends an email (not idempotent)."), Run: d.simple("sent")},
		{Spec: deploy, Run: d.simple("deployed")},
		{Spec: build, Run: d.buildStart, Poll: d.buildPoll},
		{Spec: calc, Run: d.calcStep},
	}
	for _, t := range tools {
		t.Spec.RunTimeoutMs = uint32(d.runTimeouts[t.Spec.Name].Milliseconds())
	}
	return tools
}

// inlineTools are the tools a script may call inline.
var inlineTools = map[string]bool{"calc": true}

type calcArgs struct {
	A  float64 `json:"a"`
	B  float64 `json:"b"`
	Op string  `json:"op"`
}

func calculate(args string) (string, bool) {
	var c calcArgs
	if err := json.Unmarshal([]byte(args), &c); err != nil {
		return "calc: bad arguments: " + err.Error(), true
	}
	switch c.Op {
	case "", "+":
		return strconv.FormatFloat(c.A+c.B, 'g', -1, 64), false
	case "-":
		return strconv.FormatFloat(c.A-c.B, 'g', -1, 64), false
	case "*":
		return strconv.FormatFloat(c.A*c.B, 'g', -1, 64), false
	}
	return fmt.Sprintf("calc: unknown op %q", c.Op), true
}

// inline runs the inline calls of a model output inside the RunModel
// attempt: each appends a ledger line (kind "inline") and fills in its
// result.
func (d *demoTools) inline(ctx context.Context, in client.ModelInput, calls []*dexv1.InlineResult) error {
	for _, r := range calls {
		c := client.ToolCall{SessionID: in.SessionID, StepID: in.StepID, CallID: r.CallId, Tool: r.Tool, Arguments: r.Arguments, Attempt: in.Attempt, Epoch: in.Epoch}
		a, err := d.begin(ctx, c, r.Tool, "inline")
		if err != nil {
			return err
		}
		r.Content, r.IsError = calculate(r.Arguments)
		if a.ErrorResult {
			r.Content, r.IsError = r.Tool+" failed: scripted error result", true
		}
	}
	return nil
}

// calcStep answers a calc call the cluster dispatched as a Step, which it
// never should: an inline tool runs inside RunModel.
func (d *demoTools) calcStep(context.Context, client.ToolCall) (client.ToolResult, error) {
	return client.ToolResult{}, errors.New("calc is inline: it runs inside the model call, not as a Step")
}

// begin records the execution and applies the test arguments.
func (d *demoTools) begin(ctx context.Context, c client.ToolCall, tool, kind string) (toolArgs, error) {
	var a toolArgs
	_ = json.Unmarshal([]byte(c.Arguments), &a) // arguments are free-form
	if err := d.ledger.Append(LedgerEntry{
		Session: c.SessionID, CallID: c.CallID, Tool: tool, Attempt: c.Attempt, IdempotencyKey: c.IdempotencyKey,
		Step: c.StepID, Kind: kind, TaskID: c.TaskID, Worker: d.worker, Epoch: c.Epoch,
	}); err != nil {
		return a, err
	}
	if err := wait(ctx, a.SleepMs); err != nil {
		return a, err
	}
	if int(c.Attempt) <= a.FailAttempts {
		return a, fmt.Errorf("%s: scripted failure of attempt %d", tool, c.Attempt)
	}
	return a, nil
}

func (d *demoTools) simple(answer string) client.ToolHandler {
	return func(ctx context.Context, c client.ToolCall) (client.ToolResult, error) {
		a, err := d.begin(ctx, c, c.Tool, "tool")
		if err != nil {
			return client.ToolResult{}, err
		}
		if a.ErrorResult {
			return client.ToolResult{Content: c.Tool + " failed: scripted error result", IsError: true}, nil
		}
		if a.ResultBytes > 0 {
			return client.ToolResult{Content: sized(answer+" ", a.ResultBytes)}, nil
		}
		return client.ToolResult{Content: fmt.Sprintf("%s %s", answer, c.Arguments)}, nil
	}
}

// sized is prefix followed by filler up to n bytes (at most maxFill).
func sized(prefix string, n int) string {
	n = min(n, maxFill)
	if n <= len(prefix) {
		return prefix[:n]
	}
	return prefix + filler(n-len(prefix))
}

// buildStart starts a build: the task id is derived from the idempotency
// key, so every attempt of the call names the same task.
func (d *demoTools) buildStart(ctx context.Context, c client.ToolCall) (client.ToolResult, error) {
	a, err := d.begin(ctx, c, c.Tool, "tool")
	if err != nil {
		return client.ToolResult{}, err
	}
	if a.ErrorResult {
		return client.ToolResult{Content: "build failed to start", IsError: true}, nil
	}
	key := c.IdempotencyKey
	if key == "" {
		key = c.SessionID + "/" + c.CallID
	}
	sum := sha256.Sum256([]byte(key))
	id := "build-" + hex.EncodeToString(sum[:6])
	return client.ToolResult{Content: "build started: " + id, TaskID: id}, nil
}

// buildPoll reports "running" for the first polls of a task this process
// has seen, then done.
func (d *demoTools) buildPoll(ctx context.Context, c client.ToolCall) (bool, client.ToolResult, error) {
	if _, err := d.begin(ctx, c, c.Tool+".poll", "poll"); err != nil {
		return false, client.ToolResult{}, err
	}
	d.mu.Lock()
	d.polls[c.TaskID]++
	n := d.polls[c.TaskID]
	d.mu.Unlock()
	if n <= buildPollsRunning {
		return false, client.ToolResult{}, nil
	}
	return true, client.ToolResult{Content: "build " + c.TaskID + " succeeded"}, nil
}
