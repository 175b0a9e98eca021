package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func hist(entries ...*dexv1.HistoryEntry) []*dexv1.HistoryEntry {
	for i, e := range entries {
		e.Seq = uint64(i + 1)
	}
	return entries
}

func user(text string) *dexv1.HistoryEntry {
	return &dexv1.HistoryEntry{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: text}
}
func assistant() *dexv1.HistoryEntry {
	return &dexv1.HistoryEntry{Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT}
}
func result() *dexv1.HistoryEntry {
	return &dexv1.HistoryEntry{Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT}
}

func newModel(t *testing.T, script string) (*Model, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var s *Script
	if script != "" {
		if s, err = ParseScript([]byte(script)); err != nil {
			t.Fatal(err)
		}
	}
	return &Model{script: s, ledger: l, worker: "w"}, path
}

func readLedger(t *testing.T, path string) []LedgerEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []LedgerEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e LedgerEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestDemoModelCallsThreeToolsThenAnswers(t *testing.T) {
	m, path := newModel(t, "")
	ctx := context.Background()
	h := hist(user("demo"))
	out, err := m.RunModel(ctx, client.ModelInput{SessionID: "s1", StepID: "st1", Attempt: 1, History: h})
	if err != nil {
		t.Fatal(err)
	}
	var tools, ids []string
	for _, c := range out.ToolCalls {
		tools = append(tools, c.Tool)
		ids = append(ids, c.CallId)
	}
	if strings.Join(tools, ",") != "lookup,save_note,send_email" {
		t.Fatalf("tools %v", tools)
	}
	if strings.Join(ids, ",") != "call-1-1,call-1-2,call-1-3" {
		t.Fatalf("call ids %v", ids)
	}
	if out.ToolCalls[0].Arguments != `{"query":"demo"}` {
		t.Fatalf("arguments %s", out.ToolCalls[0].Arguments)
	}
	// The same history gives the same output (a rerun after a Worker kill).
	again, _ := m.RunModel(ctx, client.ModelInput{SessionID: "s1", StepID: "st1", Attempt: 2, History: h})
	if again.ToolCalls[2].CallId != "call-1-3" {
		t.Fatalf("rerun gave %v", again)
	}
	out, err = m.RunModel(ctx, client.ModelInput{SessionID: "s1", StepID: "st5", Attempt: 1,
		History: hist(user("demo"), assistant(), result(), result(), result())})
	if err != nil || len(out.ToolCalls) != 0 || out.Text == "" {
		t.Fatalf("after results: %v %v", out, err)
	}
	// A second message of the session calls tools again, with new call ids.
	out, _ = m.RunModel(ctx, client.ModelInput{SessionID: "s1", StepID: "st6", Attempt: 1,
		History: hist(user("demo"), assistant(), result(), result(), result(), assistant(), user("again"))})
	if len(out.ToolCalls) != 3 || out.ToolCalls[0].CallId != "call-7-1" {
		t.Fatalf("second turn: %v", out)
	}
	lines := readLedger(t, path)
	if len(lines) != 4 || lines[0].Tool != "model" || lines[0].Step != "st1" || lines[1].Attempt != 2 || lines[0].PID != os.Getpid() {
		t.Fatalf("ledger %+v", lines)
	}
	if _, err := time.Parse(time.RFC3339Nano, lines[0].Time); err != nil {
		t.Fatal(err)
	}
}

// The demo with no script waits for a person: a message with the word
// "deploy" calls deploy (registered as needing approval), one with the word
// "ask" asks a question; then each answers. Other words keep the three tools.
func TestDemoModelWaitsForAPerson(t *testing.T) {
	m, _ := newModel(t, "")
	ctx := context.Background()
	var approval bool
	for _, tool := range (&demoTools{}).tools() {
		if tool.Spec.Name == "deploy" {
			approval = tool.Spec.NeedsApproval
		}
	}
	if !approval {
		t.Fatal("the demo's deploy tool does not need approval")
	}
	for msg, want := range map[string]string{
		"deploy the demo app": "deploy",
		"Please DEPLOY it.":   "deploy",
		"ask me something":    "ask_user",
		"demo":                "lookup,save_note,send_email",
		"a task for the team": "lookup,save_note,send_email", // "ask" inside a word does not count
		"redeploy":            "lookup,save_note,send_email",
	} {
		out, err := m.RunModel(ctx, client.ModelInput{SessionID: "s1", StepID: "st1", Attempt: 1, History: hist(user(msg))})
		if err != nil {
			t.Fatal(err)
		}
		var tools []string
		for _, c := range out.ToolCalls {
			tools = append(tools, c.Tool)
		}
		if strings.Join(tools, ",") != want {
			t.Errorf("%q: the model called %v; want %s", msg, tools, want)
		}
		// Once the wait is over and the result is in, the turn answers.
		out, err = m.RunModel(ctx, client.ModelInput{SessionID: "s1", StepID: "st2", Attempt: 1, History: hist(user(msg), assistant(), result())})
		if err != nil || len(out.ToolCalls) != 0 || out.Text == "" {
			t.Errorf("%q after the result: %v %v; want a text answer", msg, out, err)
		}
	}
	out, _ := m.RunModel(ctx, client.ModelInput{SessionID: "s1", StepID: "st1", Attempt: 1, History: hist(user("ask me something"))})
	if a := out.ToolCalls[0].Arguments; !strings.Contains(a, `"question":`) {
		t.Errorf("ask_user arguments %s; want a question", a)
	}
}

const testScript = `{
  "turns": [
    {"match": "flaky", "outputs": [
      {"error": {"type": "rate_limit", "message": "slow down"}},
      {"tool_calls": [{"tool": "deploy", "arguments": {"env": "{{message}}"}, "call_id": "d1"}]},
      {"text": "deployed"}
    ]},
    {"match": "reject", "prefix": true, "outputs": [
      {"tool_calls": [{"tool": "lookup"}]},
      {"error": {"type": "invalid_request"}, "always": true}
    ]},
    {"match": "ask", "outputs": [
      {"tool_calls": [{"tool": "ask_user", "arguments": {"question": "which?"}}, {"tool": "sleep", "arguments": {"seconds": 1}}]}
    ]}
  ],
  "compact": [{"error": {"type": "overloaded"}}, {"text": "short summary"}]
}`

func TestScriptedModel(t *testing.T) {
	m, _ := newModel(t, testScript)
	ctx := context.Background()
	run := func(attempt uint32, h ...*dexv1.HistoryEntry) (*dexv1.ModelOutput, error) {
		return m.RunModel(ctx, client.ModelInput{SessionID: "s", StepID: "st", Attempt: attempt, History: hist(h...)})
	}
	// Attempt 1 fails with the scripted type; the retry takes the next output.
	_, err := run(1, user("flaky"))
	var me *client.ModelError
	if !errors.As(err, &me) || me.Type != dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT || me.Msg != "slow down" {
		t.Fatalf("attempt 1: %v", err)
	}
	out, err := run(2, user("flaky"))
	if err != nil || len(out.ToolCalls) != 1 || out.ToolCalls[0].CallId != "d1" || out.ToolCalls[0].Arguments != `{"env":"flaky"}` {
		t.Fatalf("attempt 2: %v %v", out, err)
	}
	out, err = run(1, user("flaky"), assistant(), result())
	if err != nil || out.Text != "deployed" {
		t.Fatalf("after the tool: %v %v", out, err)
	}
	// Past the outputs: a plain text answer.
	if out, _ = run(1, user("flaky"), assistant(), result(), assistant(), user("x"), assistant(), result()); out.Text == "" {
		t.Fatalf("past the end: %v", out)
	}
	// Prefix match; an "always" error keeps failing, on every attempt and
	// on a retried turn.
	if out, err = run(1, user("reject this")); err != nil || out.ToolCalls[0].Tool != "lookup" || out.ToolCalls[0].Arguments != "{}" {
		t.Fatalf("reject turn: %v %v", out, err)
	}
	for a := uint32(1); a <= 3; a++ {
		if _, err := run(a, user("reject this"), assistant(), result()); !errors.As(err, &me) || me.Type != dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST {
			t.Fatalf("attempt %d: %v", a, err)
		}
	}
	// Built-ins are plain tool calls of the output.
	if out, _ = run(1, user("ask")); len(out.ToolCalls) != 2 || out.ToolCalls[0].Tool != "ask_user" {
		t.Fatalf("ask: %v", out)
	}
	// Unmatched: the demo model.
	if out, _ = run(1, user("something else")); len(out.ToolCalls) != 3 {
		t.Fatalf("unmatched: %v", out)
	}
	// Compaction: attempt 1 fails, attempt 2 gives the summary.
	if _, err := m.Compact(ctx, client.ModelInput{Attempt: 1}); !errors.As(err, &me) || me.Type != dexv1.ErrorType_ERROR_TYPE_OVERLOADED {
		t.Fatalf("compact 1: %v", err)
	}
	if s, err := m.Compact(ctx, client.ModelInput{Attempt: 2}); err != nil || s != "short summary" {
		t.Fatalf("compact 2: %q %v", s, err)
	}
}

func TestParseScriptRejectsBadScripts(t *testing.T) {
	for _, bad := range []string{
		`{"turns": [{"match": "x", "outputs": []}]}`,
		`{"turns": [{"match": "x", "outputs": [{}]}]}`,
		`{"turns": [{"match": "x", "outputs": [{"error": {"type": "bogus"}}]}]}`,
		`{"turns": [{"match": "x", "outputs": [{"text": "a", "error": {"type": "timeout"}}]}]}`,
		`{"turns": [{"match": "x", "outputs": [{"tool_calls": [{"arguments": {}}]}]}]}`,
		`{"turns": [{"match": "x", "outputs": [{"text": "a"}]}], "extra": 1}`,
		`{"compact": [{"tool_calls": [{"tool": "lookup"}]}]}`,
		`not json`,
	} {
		if _, err := ParseScript([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestLedgerConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, []byte(`{"session":"old","call_id":"c","tool":"lookup","attempt":1,"idempotency_key":"","pid":1,"time":"2026-01-01T00:00:00Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Append(LedgerEntry{Session: "s", CallID: "c" + string(rune('a'+i%26)), Tool: "save_note", Attempt: 1, IdempotencyKey: "k"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLedger(t, path)
	if len(lines) != 51 || lines[0].Session != "old" {
		t.Fatalf("%d lines, first %+v", len(lines), lines[0])
	}
	raw, _ := os.ReadFile(path)
	var first map[string]any
	_ = json.Unmarshal([]byte(strings.SplitN(string(raw), "\n", 3)[1]), &first)
	for _, k := range []string{"session", "call_id", "tool", "attempt", "idempotency_key", "pid", "time"} {
		if _, ok := first[k]; !ok {
			t.Fatalf("line lacks %q: %v", k, first)
		}
	}
}

func TestDemoTools(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := &demoTools{ledger: l, worker: "w", polls: map[string]int{}}
	byName := map[string]client.Tool{}
	for _, tl := range d.tools() {
		byName[tl.Spec.Name] = tl
	}
	if !byName["deploy"].Spec.NeedsApproval || !byName["build"].Spec.LongRunning ||
		byName["send_email"].Spec.Access != dexv1.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT || byName["lookup"].Spec.Access != dexv1.ToolAccess_TOOL_ACCESS_READ {
		t.Fatal("policies")
	}
	ctx := context.Background()
	call := client.ToolCall{SessionID: "s", CallID: "c1", Tool: "build", IdempotencyKey: "dex:s:c1", Attempt: 1, Arguments: "{}"}
	r1, err := byName["build"].Run(ctx, call)
	if err != nil || r1.TaskID == "" {
		t.Fatal(r1, err)
	}
	call.Attempt = 2
	if r2, _ := byName["build"].Run(ctx, call); r2.TaskID != r1.TaskID {
		t.Fatal("a second attempt of the start named another task")
	}
	call.TaskID = r1.TaskID
	for i := 1; i <= 3; i++ {
		done, res, err := byName["build"].Poll(ctx, call)
		if err != nil || done != (i == 3) || (done && res.Content == "") {
			t.Fatalf("poll %d: %v %v %v", i, done, res, err)
		}
	}
	fc := client.ToolCall{SessionID: "s", CallID: "c2", Tool: "save_note", Attempt: 1, Arguments: `{"fail_attempts":1}`}
	if _, err := byName["save_note"].Run(ctx, fc); err == nil {
		t.Fatal("attempt 1 did not fail")
	}
	fc.Attempt = 2
	if _, err := byName["save_note"].Run(ctx, fc); err != nil {
		t.Fatal(err)
	}
	lines := readLedger(t, path)
	var polls, starts int
	for _, e := range lines {
		switch e.Tool {
		case "build":
			starts++
		case "build.poll":
			polls++
			if e.TaskID != r1.TaskID || e.Kind != "poll" {
				t.Fatalf("poll line %+v", e)
			}
		}
	}
	if starts != 2 || polls != 3 || len(lines) != 7 {
		t.Fatalf("ledger %+v", lines)
	}
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never said %q", path, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestParseFlags(t *testing.T) {
	if _, err := parseFlags([]string{"--addr", "dex:///a:1"}, io.Discard); err == nil {
		t.Fatal("missing --ledger accepted")
	}
	c, err := parseFlags([]string{"--addr", "dex:///a:1,b:2", "--ledger", "l", "--hold", "before-claim", "--concurrency", "2"}, io.Discard)
	if err != nil || c.concurrency != 2 || c.hold != "before-claim" {
		t.Fatal(c, err)
	}
}

func TestInlineCalcRunsInsideRunModel(t *testing.T) {
	m, path := newModel(t, `{"turns": [{"match": "sum", "outputs": [
	  {"text": "adding", "inline": [{"tool": "calc", "arguments": {"a": 2, "b": 2}}, {"tool": "calc", "call_id": "mul", "arguments": {"a": 3, "b": 4, "op": "*"}}]}]}]}`)
	d := &demoTools{ledger: m.ledger, worker: "w", polls: map[string]int{}}
	m.inline = d.inline
	in := client.ModelInput{SessionID: "s1", StepID: "st1", Attempt: 1, History: hist(user("sum")), Epoch: 4}
	out, err := m.RunModel(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.InlineResults) != 2 || out.InlineResults[0].Content != "4" || out.InlineResults[1].Content != "12" ||
		out.InlineResults[0].CallId != "inline-1-1" || out.InlineResults[1].CallId != "mul" || out.InlineResults[0].Tool != "calc" {
		t.Fatalf("inline results %v", out.InlineResults)
	}
	// A rerun of the attempt runs the inline tool again.
	in.Attempt = 2
	if _, err := m.RunModel(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	var inline, model int
	for _, e := range readLedger(t, path) {
		switch {
		case e.Kind == "inline" && e.Tool == "calc" && e.Step == "st1" && e.Session == "s1" && e.Epoch == 4:
			inline++ // with the RunModel attempt's epoch, as every line
		case e.Kind == "model":
			model++
		}
	}
	if inline != 4 || model != 2 {
		t.Fatalf("ledger: %d inline calc lines, %d model lines; want 4 and 2", inline, model)
	}
	var calc client.Tool
	for _, tl := range d.tools() {
		if tl.Spec.Name == "calc" {
			calc = tl
		}
	}
	if calc.Spec == nil || !calc.Spec.Inline || calc.Spec.Access != dexv1.ToolAccess_TOOL_ACCESS_READ {
		t.Fatalf("calc spec %v", calc.Spec)
	}
	if _, err := ParseScript([]byte(`{"turns": [{"match": "x", "outputs": [{"inline": [{"tool": "lookup"}]}]}]}`)); err == nil {
		t.Fatal("a script calling lookup inline was accepted")
	}
	if got, isErr := calculate(`{"a": 1, "b": 2, "op": "/"}`); !isErr {
		t.Fatalf("unknown op answered %q", got)
	}
}

func TestPollIntervalFlag(t *testing.T) {
	c, err := parseFlags([]string{"--addr", "a:1", "--ledger", "l", "--poll-interval", "2s"}, io.Discard)
	if err != nil || c.pollInterval != 2*time.Second {
		t.Fatal(c, err)
	}
	d := &demoTools{polls: map[string]int{}, pollInterval: c.pollInterval}
	for _, tl := range d.tools() {
		if tl.Spec.Name == "build" && tl.Spec.PollIntervalMs != 2000 {
			t.Fatalf("build polls every %d ms", tl.Spec.PollIntervalMs)
		}
	}
	if _, err := parseFlags([]string{"--addr", "a:1", "--ledger", "l", "--poll-interval", "0s"}, io.Discard); err == nil {
		t.Fatal("--poll-interval 0 accepted")
	}
}

func TestCompactedTurnMatchesItsSummary(t *testing.T) {
	m, _ := newModel(t, `{"turns": [{"match": "tools", "prefix": true, "outputs": [
	  {"tool_calls": [{"tool": "lookup"}]}, {"text": "done"}]}],
	 "compact": [{"text": "{{message}}", "always": true}]}`)
	ctx := context.Background()
	summary, err := m.Compact(ctx, client.ModelInput{SessionID: "s", StepID: "c", Attempt: 2, History: hist(user("tools: a long request"))})
	if err != nil || summary != "tools: a long request" {
		t.Fatalf("summary %q, %v", summary, err)
	}
	// After the compaction the model is sent the history from the summary
	// on: the summary stands for the turn's message.
	sum := &dexv1.HistoryEntry{Kind: dexv1.HistoryKind_HISTORY_KIND_SUMMARY, Text: summary}
	out, err := m.RunModel(ctx, client.ModelInput{SessionID: "s", StepID: "m1", Attempt: 1, History: hist(sum)})
	if err != nil || len(out.ToolCalls) != 1 || out.ToolCalls[0].Tool != "lookup" {
		t.Fatalf("first output after the summary: %v, %v", out, err)
	}
	out, err = m.RunModel(ctx, client.ModelInput{SessionID: "s", StepID: "m2", Attempt: 1, History: hist(sum, assistant(), result())})
	if err != nil || out.Text != "done" || len(out.ToolCalls) != 0 {
		t.Fatalf("second output after the summary: %v, %v", out, err)
	}
}
