package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Script drives the scripted model. See README.md for the format.
type Script struct {
	// Turns are tried in order; the first whose Match fits one of the
	// turn's user messages gives the turn's outputs.
	Turns []ScriptTurn `json:"turns"`
	// Default: the outputs of a turn no entry matches (the built-in demo
	// when empty).
	Default []Output `json:"default,omitempty"`
	// Compact: the outputs of CompactContext attempts, the n-th attempt
	// taking the n-th (a text is the summary). Empty: always succeed.
	Compact []Output `json:"compact,omitempty"`
}

// ScriptTurn maps a message to model outputs.
type ScriptTurn struct {
	Match   string   `json:"match"`
	Prefix  bool     `json:"prefix,omitempty"`
	Outputs []Output `json:"outputs"`
}

// Output is one model output: text and/or tool calls, or an error.
type Output struct {
	Text      string       `json:"text,omitempty"`
	ToolCalls []ScriptCall `json:"tool_calls,omitempty"`
	// Inline: calls of inline tools (calc) the Worker runs inside this
	// RunModel; their results go out with the output as inline_results.
	Inline []ScriptCall `json:"inline,omitempty"`
	Error  *ScriptError `json:"error,omitempty"`
	// Always: this output answers every later RunModel of the turn too.
	Always bool `json:"always,omitempty"`
	// DelayMs: the model "thinks" this long before answering.
	DelayMs int `json:"delay_ms,omitempty"`
	// WhileFile: this output exists only while the file exists; when it is
	// missing the output is left out as if the script did not have it, so a
	// test can switch the model (an outage, a rejection) on and off.
	WhileFile string `json:"while_file,omitempty"`
	// Usage: what the call reports it used (default: DemoUsage).
	Usage *ScriptUsage `json:"usage,omitempty"`
}

// ScriptUsage is a scripted model call's usage.
type ScriptUsage struct {
	InputTokens  uint64 `json:"input_tokens"`
	OutputTokens uint64 `json:"output_tokens"`
	CostMicros   uint64 `json:"cost_micros"`
}

// DemoUsage is what every scripted model call reports it used, unless its
// output says otherwise: fixed figures, so that budgets can be tried.
var DemoUsage = ScriptUsage{InputTokens: 100, OutputTokens: 20, CostMicros: 150}

// DemoModelName is the model name the scripted model reports.
const DemoModelName = "dex-demo"

func (o Output) usage() *dexv1.Usage {
	u := DemoUsage
	if o.Usage != nil {
		u = *o.Usage
	}
	return &dexv1.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostMicros: u.CostMicros, Model: DemoModelName}
}

// active leaves out the outputs whose while_file is missing.
func active(outs []Output) []Output {
	var kept []Output
	for _, o := range outs {
		if o.WhileFile != "" {
			if _, err := os.Stat(o.WhileFile); err != nil {
				continue
			}
		}
		kept = append(kept, o)
	}
	return kept
}

// ScriptCall is one tool call of an output.
type ScriptCall struct {
	Tool string `json:"tool"`
	// Any JSON value; "{{message}}" inside strings becomes the user message.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Optional; default call-<seq of the last history entry>-<n>.
	CallID string `json:"call_id,omitempty"`
}

// ScriptError fails the RunModel attempt with an error type.
type ScriptError struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
	// RetryAfterMs: a rate_limit error's Retry-After, as a provider's
	// header would give it (0: none).
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
}

var errorTypes = map[string]dexv1.ErrorType{
	"":                dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED,
	"none":            dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED,
	"invalid_request": dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST,
	"context_length":  dexv1.ErrorType_ERROR_TYPE_CONTEXT_LENGTH,
	"rate_limit":      dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT,
	"overloaded":      dexv1.ErrorType_ERROR_TYPE_OVERLOADED,
	"server_error":    dexv1.ErrorType_ERROR_TYPE_SERVER_ERROR,
	"timeout":         dexv1.ErrorType_ERROR_TYPE_TIMEOUT,
	"network":         dexv1.ErrorType_ERROR_TYPE_NETWORK,
	"unknown":         dexv1.ErrorType_ERROR_TYPE_UNKNOWN,
}

// LoadScript reads and checks a script file.
func LoadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScript(b)
}

// ParseScript parses and checks a script.
func ParseScript(b []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("script: %w", err)
	}
	check := func(where string, outs []Output, model bool) error {
		for i, o := range outs {
			at := fmt.Sprintf("%s output %d", where, i+1)
			if o.Error == nil && o.Text == "" && len(o.ToolCalls) == 0 && len(o.Inline) == 0 {
				return fmt.Errorf("script: %s has no text, tool call or error", at)
			}
			if o.Error != nil && (o.Text != "" || len(o.ToolCalls) > 0 || len(o.Inline) > 0) {
				return fmt.Errorf("script: %s has an error and an answer", at)
			}
			if err := checkError(o.Error); err != nil {
				return fmt.Errorf("script: %s: %v", at, err)
			}
			if !model && (len(o.ToolCalls) > 0 || len(o.Inline) > 0) {
				return fmt.Errorf("script: %s: a compaction calls no tool", at)
			}
			if o.DelayMs < 0 {
				return fmt.Errorf("script: %s: negative delay_ms", at)
			}
			if err := checkFills(at, o); err != nil {
				return err
			}
			for j, c := range o.ToolCalls {
				if c.Tool == "" {
					return fmt.Errorf("script: %s tool call %d names no tool", at, j+1)
				}
			}
			for j, c := range o.Inline {
				if !inlineTools[c.Tool] {
					return fmt.Errorf("script: %s inline call %d: %q is not an inline tool (known: calc)", at, j+1, c.Tool)
				}
			}
		}
		return nil
	}
	for i, t := range s.Turns {
		where := fmt.Sprintf("turn %d (%q)", i+1, t.Match)
		if len(t.Outputs) == 0 {
			return nil, fmt.Errorf("script: %s has no outputs", where)
		}
		if err := check(where, t.Outputs, true); err != nil {
			return nil, err
		}
	}
	if err := check("default", s.Default, true); err != nil {
		return nil, err
	}
	if err := check("compact", s.Compact, false); err != nil {
		return nil, err
	}
	return &s, nil
}

// checkError checks an output's error (nil: none).
func checkError(e *ScriptError) error {
	if e == nil {
		return nil
	}
	if _, ok := errorTypes[e.Type]; !ok {
		return fmt.Errorf("unknown error type %q", e.Type)
	}
	if e.RetryAfterMs < 0 {
		return fmt.Errorf("negative retry_after_ms")
	}
	if e.RetryAfterMs > 0 && e.Type != "rate_limit" {
		return fmt.Errorf("retry_after_ms is for a rate_limit error, not %q", e.Type)
	}
	return nil
}

// The model with no script. demoOutputs: call lookup, save_note and
// send_email in one output, then answer. A message with the word "deploy"
// calls deploy instead, which needs approval, so the session waits for a
// person; one with the word "ask" asks the user a question (the built-in
// ask_user), and the session waits for the answer.
var (
	demoOutputs = []Output{
		{ToolCalls: []ScriptCall{
			{Tool: "lookup", Arguments: json.RawMessage(`{"query":"{{message}}"}`)},
			{Tool: "save_note", Arguments: json.RawMessage(`{"note":"{{message}}"}`)},
			{Tool: "send_email", Arguments: json.RawMessage(`{"to":"ops@example.com","body":"{{message}}"}`)},
		}},
		{Text: "Done: looked it up, saved a note and sent the email."},
	}
	demoDeploy = []Output{
		{ToolCalls: []ScriptCall{{Tool: "deploy", Arguments: json.RawMessage(`{"service":"demo","request":"{{message}}"}`)}}},
		{Text: "Done: the deploy ran if you approved it, and did not if you denied it."},
	}
	demoAsk = []Output{
		{ToolCalls: []ScriptCall{{Tool: "ask_user", Arguments: json.RawMessage(`{"question":"Which colour should the demo use?"}`)}}},
		{Text: "Thanks for the answer."},
	}
)

// demoFor picks the demo's outputs by the words of the turn's messages.
func demoFor(msgs []string) []Output {
	for _, m := range msgs {
		words := strings.FieldsFunc(strings.ToLower(m), func(r rune) bool { return !unicode.IsLetter(r) })
		if slices.Contains(words, "deploy") {
			return demoDeploy
		}
		if slices.Contains(words, "ask") {
			return demoAsk
		}
	}
	return demoOutputs
}

// finalText answers a turn whose outputs ran out.
const finalText = "done"

// outputsFor picks the outputs of a turn whose user messages are msgs.
func (s *Script) outputsFor(msgs []string) []Output {
	if s != nil {
		for _, t := range s.Turns {
			for _, m := range msgs {
				if m == t.Match || (t.Prefix && strings.HasPrefix(m, t.Match)) {
					return t.Outputs
				}
			}
		}
		if len(s.Default) > 0 {
			return s.Default
		}
	}
	return demoFor(msgs)
}

// pick is the output index of a RunModel. Outputs are consumed in order:
// each of the n0 outputs the turn already committed took one answer, and
// the error outputs before it (consumed by failed attempts); then each
// earlier attempt of this Step took one error output.
func pick(outs []Output, n0 int, attempt uint32) int {
	idx := 0
	for k := 0; k < n0; k++ {
		for idx < len(outs) && outs[idx].Error != nil && !outs[idx].Always {
			idx++
		}
		idx++
	}
	for a := uint32(1); a < attempt; a++ {
		o := at(outs, idx)
		if o.Error != nil && !o.Always {
			idx++
		}
	}
	return idx
}

// at is output idx, honouring Always; past the end the turn answers text.
func at(outs []Output, idx int) Output {
	for i := 0; i < len(outs) && i <= idx; i++ {
		if outs[i].Always {
			return outs[i]
		}
	}
	if idx < len(outs) {
		return outs[idx]
	}
	return Output{Text: finalText}
}

// turnOf reads the turn in progress from the history the model is sent:
// its user messages (the run of user entries ending at the last one), the
// outputs it already committed (assistant entries after them) and the seq
// of the last entry.
func turnOf(h []*dexv1.HistoryEntry) (msgs []string, outputs int, lastSeq uint64) {
	last := -1
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == dexv1.HistoryKind_HISTORY_KIND_USER {
			last = i
			break
		}
	}
	if len(h) > 0 {
		lastSeq = h[len(h)-1].Seq
	}
	if last < 0 {
		// No user message left after the summary (an operator's edit can
		// do that): the summary stands for the turn's messages.
		for i := len(h) - 1; i >= 0; i-- {
			if h[i].Kind == dexv1.HistoryKind_HISTORY_KIND_SUMMARY {
				for _, e := range h[i+1:] {
					if e.Kind == dexv1.HistoryKind_HISTORY_KIND_ASSISTANT {
						outputs++
					}
				}
				return []string{h[i].Text}, outputs, lastSeq
			}
		}
		return nil, 0, lastSeq
	}
	for i := last; i >= 0 && h[i].Kind == dexv1.HistoryKind_HISTORY_KIND_USER; i-- {
		msgs = append([]string{h[i].Text}, msgs...)
	}
	for _, e := range h[last+1:] {
		if e.Kind == dexv1.HistoryKind_HISTORY_KIND_ASSISTANT {
			outputs++
		}
	}
	return msgs, outputs, lastSeq
}

// Model is the scripted, deterministic model: its answer depends only on
// the history it is sent and the attempt number.
type Model struct {
	script *Script
	ledger *Ledger
	worker string
	// inline runs the output's inline calls (nil: demoTools.inline).
	inline func(ctx context.Context, in client.ModelInput, calls []*dexv1.InlineResult) error
	// stream: the output's text goes out as live output first, streamDelta
	// bytes every streamEvery (--stream).
	stream      bool
	streamDelta int
	streamEvery time.Duration
}

// streamText streams text in small deltas, as a model writes it.
func (m *Model) streamText(ctx context.Context, in client.ModelInput, text string) error {
	for len(text) > 0 {
		n := min(m.streamDelta, len(text))
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++ // a delta ends on a character's end
		}
		in.Stream(text[:n])
		text = text[n:]
		if err := wait(ctx, int(m.streamEvery.Milliseconds())); err != nil {
			return err
		}
	}
	return nil
}

func (m *Model) record(kind string, in client.ModelInput) error {
	return m.ledger.Append(LedgerEntry{Session: in.SessionID, Tool: kind, Attempt: in.Attempt, Step: in.StepID, Kind: kind, Worker: m.worker, Epoch: in.Epoch, Agent: in.Agent})
}

func wait(ctx context.Context, ms int) error {
	if ms <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func scriptError(e *ScriptError) error {
	msg := expandFill(e.Message)
	if msg == "" {
		msg = "scripted " + e.Type + " error"
	}
	return &client.ModelError{Type: errorTypes[e.Type], Msg: msg, RetryAfter: time.Duration(e.RetryAfterMs) * time.Millisecond}
}

// Output computes the model output for in (without side effects).
func (m *Model) Output(in client.ModelInput) (Output, *dexv1.ModelOutput, error) {
	msgs, n0, lastSeq := turnOf(in.History)
	outs := active(m.script.outputsFor(msgs))
	o := at(outs, pick(outs, n0, in.Attempt))
	if o.Error != nil {
		return o, nil, scriptError(o.Error)
	}
	msg := ""
	if len(msgs) > 0 {
		msg = msgs[len(msgs)-1]
	}
	esc, _ := json.Marshal(msg)
	escaped := string(esc[1 : len(esc)-1])
	out := &dexv1.ModelOutput{Text: strings.ReplaceAll(expandFill(o.Text), "{{message}}", msg), Usage: o.usage()}
	for i, c := range o.ToolCalls {
		id := c.CallID
		if id == "" {
			id = fmt.Sprintf("call-%d-%d", lastSeq, i+1)
		}
		args := compactArgs(c.Arguments, escaped)
		out.ToolCalls = append(out.ToolCalls, &dexv1.ToolCall{CallId: id, Tool: c.Tool, Arguments: args})
	}
	for i, c := range o.Inline {
		id := c.CallID
		if id == "" {
			id = fmt.Sprintf("inline-%d-%d", lastSeq, i+1)
		}
		out.InlineResults = append(out.InlineResults, &dexv1.InlineResult{CallId: id, Tool: c.Tool, Arguments: compactArgs(c.Arguments, escaped)})
	}
	return o, out, nil
}

// compactArgs is a call's arguments as compact JSON ("{}" when empty) with
// {{fill:N}} and {{message}} replaced (the fill first: a message is never
// expanded).
func compactArgs(raw json.RawMessage, escapedMsg string) string {
	args := "{}"
	if len(raw) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err == nil {
			args = buf.String()
		}
	}
	return strings.ReplaceAll(expandFill(args), "{{message}}", escapedMsg)
}

// RunModel implements client.ModelHandler.
func (m *Model) RunModel(ctx context.Context, in client.ModelInput) (*dexv1.ModelOutput, error) {
	if err := m.record("model", in); err != nil {
		return nil, err
	}
	o, out, err := m.Output(in)
	if werr := wait(ctx, o.DelayMs); werr != nil {
		return nil, werr
	}
	if m.stream && err == nil {
		if serr := m.streamText(ctx, in, out.GetText()); serr != nil {
			return nil, serr
		}
	}
	if err == nil && len(out.InlineResults) > 0 {
		if m.inline == nil {
			return nil, fmt.Errorf("inline calls but no inline tool runner")
		}
		// Inline tools run inside this RunModel attempt: a rerun of the
		// attempt runs them again.
		if err := m.inline(ctx, in, out.InlineResults); err != nil {
			return nil, err
		}
	}
	return out, err
}

// Compact implements client.ModelHandler.
func (m *Model) Compact(ctx context.Context, in client.ModelInput) (string, error) {
	if err := m.record("compact", in); err != nil {
		return "", err
	}
	summary := fmt.Sprintf("Summary of %d entries.", len(in.History))
	if m.script == nil || len(m.script.Compact) == 0 {
		return summary, nil
	}
	o := at(m.script.Compact, int(in.Attempt)-1)
	if err := wait(ctx, o.DelayMs); err != nil {
		return "", err
	}
	if o.Error != nil {
		return "", scriptError(o.Error)
	}
	if o.Text == "" || (int(in.Attempt) > len(m.script.Compact) && !o.Always) {
		return summary, nil
	}
	msgs, _, _ := turnOf(in.History)
	msg := ""
	if len(msgs) > 0 {
		msg = msgs[len(msgs)-1]
	}
	return strings.ReplaceAll(expandFill(o.Text), "{{message}}", msg), nil
}
