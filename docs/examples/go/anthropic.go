package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// systemPrompt comes first in every request; the session's notes and
// summaries follow it.
const systemPrompt = "You help an online shop's staff with orders and billing. " +
	"Use the tools to look orders up, send invoices and charge cards."

// compactPrompt asks the model for the summary that replaces the history a
// session compacts.
const compactPrompt = "Summarize the conversation so far for your own later use: " +
	"what was asked, which tools ran with which results, and what is still open. Answer with the summary only."

// Anthropic is the Worker's model: one non-streaming Messages API call per
// RunModel or CompactContext attempt.
type Anthropic struct {
	BaseURL   string // without /v1
	APIKey    string
	Model     string
	MaxTokens int
	HTTP      *http.Client
}

// NewAnthropicFromEnv reads ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY and
// ANTHROPIC_MODEL.
func NewAnthropicFromEnv() *Anthropic {
	return &Anthropic{
		BaseURL:   strings.TrimRight(envOr("ANTHROPIC_BASE_URL", "https://api.anthropic.com"), "/"),
		APIKey:    os.Getenv("ANTHROPIC_API_KEY"),
		Model:     envOr("ANTHROPIC_MODEL", "claude-sonnet-4-5"),
		MaxTokens: 1024,
		// The cluster cancels an attempt's ctx when it gives up on it; this
		// only bounds a request nobody cancels.
		HTTP: &http.Client{Timeout: 10 * time.Minute},
	}
}

// RunModel sends the session's history and the offered tools, and turns the
// answer into Dex's model output: its text, and a Dex tool call per
// tool_use block. The cluster runs those calls as Steps by their tools'
// policies and feeds the results back in the next RunModel.
func (a *Anthropic) RunModel(ctx context.Context, in client.ModelInput) (*dexv1.ModelOutput, error) {
	system, messages := toMessages(in.History)
	req := messagesRequest{
		Model:     a.Model,
		MaxTokens: a.MaxTokens,
		System:    system,
		Messages:  messages,
		Tools:     toTools(in.Tools),
	}
	resp, err := a.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return toOutput(resp), nil
}

// Compact asks the model to summarize the history; the summary replaces it.
func (a *Anthropic) Compact(ctx context.Context, in client.ModelInput) (string, error) {
	system, messages := toMessages(in.History)
	messages = appendBlock(messages, "user", block{Type: "text", Text: compactPrompt})
	resp, err := a.send(ctx, messagesRequest{Model: a.Model, MaxTokens: a.MaxTokens, System: system, Messages: messages})
	if err != nil {
		return "", err
	}
	return toOutput(resp).Text, nil
}

// The Messages API's shapes, as far as this Worker uses them.
type (
	messagesRequest struct {
		Model     string    `json:"model"`
		MaxTokens int       `json:"max_tokens"`
		System    string    `json:"system,omitempty"`
		Messages  []message `json:"messages"`
		Tools     []tool    `json:"tools,omitempty"`
	}
	message struct {
		Role    string  `json:"role"` // user or assistant
		Content []block `json:"content"`
	}
	// block is a content block: text, tool_use or tool_result.
	block struct {
		Type string `json:"type"`
		// text
		Text string `json:"text,omitempty"`
		// tool_use
		ID    string          `json:"id,omitempty"`
		Name  string          `json:"name,omitempty"`
		Input json.RawMessage `json:"input,omitempty"`
		// tool_result
		ToolUseID string `json:"tool_use_id,omitempty"`
		Content   string `json:"content,omitempty"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	messagesResponse struct {
		Content    []block `json:"content"`
		StopReason string  `json:"stop_reason"`
		Model      string  `json:"model"`
		Usage      struct {
			InputTokens  uint64 `json:"input_tokens"`
			OutputTokens uint64 `json:"output_tokens"`
		} `json:"usage"`
	}
	errorResponse struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// send makes one call. An error status becomes a *client.ModelError whose
// type (rate_limit, overloaded, server_error, invalid_request, ...) decides
// whether the cluster retries the attempt (docs/model-errors.md). Transport
// errors are wrapped as they are: the library classifies a refused or reset
// connection as network and a deadline as timeout.
func (a *Anthropic) send(ctx context.Context, req messagesRequest) (*messagesResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.BaseURL+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("content-type", "application/json")
	hreq.Header.Set("x-api-key", a.APIKey)
	hreq.Header.Set("anthropic-version", "2023-06-01")
	hresp, err := a.HTTP.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	defer hresp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(hresp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("anthropic: reading the answer: %w", err)
	}
	if hresp.StatusCode/100 != 2 {
		return nil, httpError(hresp.StatusCode, hresp.Header, raw)
	}
	var resp messagesResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("anthropic: the answer is not a message: %w", err)
	}
	return &resp, nil
}

// httpError is the model error of an error status. Its message keeps the
// provider's own (the library reads "prompt is too long" as context_length
// and a 503 that says "overloaded" as overloaded); a 429's Retry-After
// holds the provider for every Worker (docs/flow-control.md).
func httpError(status int, header http.Header, raw []byte) *client.ModelError {
	var e errorResponse
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Type + ": " + e.Error.Message
	}
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	me := client.NewHTTPModelError(status, fmt.Sprintf("anthropic: HTTP %d: %s", status, msg))
	if me.Type == dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT {
		me.RetryAfter = client.RetryAfterOfHeader(header)
	}
	return me
}

// toMessages renders Dex's history as the Messages API's system text and
// messages: user messages as user text, an assistant entry as its text and
// a tool_use block per tool call, tool results as tool_result blocks of the
// next user message, notes (what the cluster tells the model, e.g. that a
// turn was cancelled) and summaries as system text.
func toMessages(history []*dexv1.HistoryEntry) (string, []message) {
	system := []string{systemPrompt}
	var msgs []message
	used := map[string]bool{} // tool_use ids so far: a result needs its call
	result := func(callID, tool, content string, isError bool) {
		if !used[callID] {
			// Its call was compacted away: say it in words, the API refuses
			// a tool_result without its tool_use.
			msgs = appendBlock(msgs, "user", block{Type: "text", Text: fmt.Sprintf("(Result of an earlier %s call %s: %s)", tool, callID, content)})
			return
		}
		msgs = appendBlock(msgs, "user", block{Type: "tool_result", ToolUseID: callID, Content: content, IsError: isError})
	}
	for _, e := range history {
		switch e.Kind {
		case dexv1.HistoryKind_HISTORY_KIND_USER:
			msgs = appendBlock(msgs, "user", block{Type: "text", Text: nonEmpty(e.Text)})
		case dexv1.HistoryKind_HISTORY_KIND_ASSISTANT:
			if e.Text != "" {
				msgs = appendBlock(msgs, "assistant", block{Type: "text", Text: e.Text})
			}
			// Inline tools ran inside that model call; their results came
			// with its output.
			for _, r := range e.InlineResults {
				msgs = appendBlock(msgs, "assistant", toolUse(r.CallId, r.Tool, r.Arguments))
				used[r.CallId] = true
			}
			for _, c := range e.ToolCalls {
				msgs = appendBlock(msgs, "assistant", toolUse(c.CallId, c.Tool, c.Arguments))
				used[c.CallId] = true
			}
			if len(e.InlineResults) == 0 && len(e.ToolCalls) == 0 && e.Text == "" {
				msgs = appendBlock(msgs, "assistant", block{Type: "text", Text: "(no answer)"})
			}
			for _, r := range e.InlineResults {
				result(r.CallId, r.Tool, r.Content, r.IsError)
			}
		case dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT:
			result(e.CallId, e.Tool, e.Text, e.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED)
		case dexv1.HistoryKind_HISTORY_KIND_NOTE:
			system = append(system, e.Text)
		case dexv1.HistoryKind_HISTORY_KIND_SUMMARY:
			system = append(system, "Summary of the conversation so far: "+e.Text)
		}
	}
	// The first message must be the user's (after a compaction the history
	// may start with the model's answer).
	if len(msgs) == 0 || msgs[0].Role != "user" {
		msgs = append([]message{{Role: "user", Content: []block{{Type: "text", Text: "(The conversation goes on from the summary.)"}}}}, msgs...)
	}
	return strings.Join(system, "\n\n"), msgs
}

// appendBlock adds b to the last message when it has the same role, else
// starts a message. A user's text after tool results starts a message of
// its own: the API joins consecutive user messages into one turn, and a
// reader that tells a new user message from tool results (the scripted
// model picks its answer by the last user message) still sees it.
func appendBlock(msgs []message, role string, b block) []message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		last := &msgs[n-1]
		if !(b.Type == "text" && last.Content[len(last.Content)-1].Type == "tool_result") {
			last.Content = append(last.Content, b)
			return msgs
		}
	}
	return append(msgs, message{Role: role, Content: []block{b}})
}

// toolUse is a tool call as a tool_use block; its input must be a JSON
// object.
func toolUse(callID, name, arguments string) block {
	input := json.RawMessage(arguments)
	var obj map[string]json.RawMessage
	if json.Unmarshal(input, &obj) != nil || obj == nil {
		input = json.RawMessage(`{}`)
	}
	return block{Type: "tool_use", ID: callID, Name: name, Input: input}
}

// toTools offers the tools the cluster says this session's model may call.
// A ToolSpec has no argument schema: its description says the arguments.
func toTools(specs []*dexv1.ToolSpec) []tool {
	out := make([]tool, 0, len(specs))
	for _, s := range specs {
		out = append(out, tool{Name: s.Name, Description: s.Description, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return out
}

// toOutput is Dex's model output of an answer: its text blocks joined, and
// a tool call per tool_use block, the block's id as the call id.
func toOutput(resp *messagesResponse) *dexv1.ModelOutput {
	out := &dexv1.ModelOutput{}
	var texts []string
	for _, b := range resp.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			args := string(b.Input)
			if args == "" || args == "null" {
				args = "{}"
			}
			out.ToolCalls = append(out.ToolCalls, &dexv1.ToolCall{CallId: b.ID, Tool: b.Name, Arguments: args})
		}
	}
	out.Text = strings.Join(texts, "")
	out.Usage = &dexv1.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, Model: resp.Model}
	return out
}

func nonEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

var _ client.ModelHandler = (*Anthropic)(nil)
