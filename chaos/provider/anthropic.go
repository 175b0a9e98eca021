package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// messagesRequest is the part of an Anthropic Messages request the server reads.
type messagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// offered names the tools the request offers.
func (r *messagesRequest) offered() []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

func (r *messagesRequest) conversation() conversation {
	var b builder
	for _, m := range r.Messages {
		switch {
		case m.Role == "assistant":
			b.assistant()
		case m.Role == "user" && !holdsToolResult(m.Content):
			text, _ := textOf(m.Content)
			b.user(text)
		default:
			b.other()
		}
	}
	return b.c
}

// holdsToolResult reports whether a user message carries tool results: it
// answers the previous assistant turn and is not a new user message.
func holdsToolResult(raw json.RawMessage) bool {
	var blocks []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

// messages serves POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if err := decode(r, &req); err != nil {
		writeAnthropicError(w, &failure{status: http.StatusBadRequest, message: err.Error()}, 0)
		return
	}
	p := s.decide("messages", req.Model, req.Stream, req.conversation(), req.offered())
	if wait(r.Context(), p.delay) != nil {
		return
	}
	if p.fail != nil {
		writeAnthropicError(w, p.fail, p.seq)
		return
	}
	id := fmt.Sprintf("msg_dex_%d", p.seq)
	blocks := anthropicContent(p)
	stop := "end_turn"
	if len(p.out.ToolCalls) > 0 {
		stop = "tool_use"
	}
	outTokens := chatUsage(p.out)["completion_tokens"]
	message := func(content []any, stopReason any, outputTokens any) map[string]any {
		return map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": content,
			"stop_reason": stopReason, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 10, "output_tokens": outputTokens},
		}
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, message(blocks, stop, outTokens))
		return
	}
	out := startSSE(w)
	out.event("message_start", map[string]any{"type": "message_start", "message": message([]any{}, nil, 1)})
	out.event("ping", map[string]any{"type": "ping"})
	for i, block := range blocks {
		b := block.(map[string]any)
		var start map[string]any
		var deltas []map[string]any
		switch b["type"] {
		case "text":
			start = map[string]any{"type": "text", "text": ""}
			for _, piece := range pieces(b["text"].(string), 8) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": piece})
			}
		case "tool_use":
			start = map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}
			for _, piece := range pieces(string(b["input"].(json.RawMessage)), 8) {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		}
		out.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		for _, d := range deltas {
			out.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		out.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	out.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": outTokens}})
	out.event("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicContent renders the output as content blocks: the text, then one
// tool_use block per tool call.
func anthropicContent(p plan) []any {
	blocks := []any{}
	if p.out.Text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": p.out.Text})
	}
	for i, c := range p.out.ToolCalls {
		blocks = append(blocks, map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_dex_%d_%d", p.seq, i), "name": c.Name,
			"input": json.RawMessage(c.args()),
		})
	}
	return blocks
}
