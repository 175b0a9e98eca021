package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// chatRequest is the part of a Chat Completions request the server reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// offered names the tools the request offers.
func (r *chatRequest) offered() []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

func (r *chatRequest) conversation() conversation {
	var b builder
	for _, m := range r.Messages {
		switch m.Role {
		case "user":
			text, _ := textOf(m.Content)
			b.user(text)
		case "assistant":
			b.assistant()
		default:
			b.other()
		}
	}
	return b.c
}

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := decode(r, &req); err != nil {
		writeOpenAIError(w, &failure{status: http.StatusBadRequest, message: err.Error()})
		return
	}
	p := s.decide("chat.completions", req.Model, req.Stream, req.conversation(), req.offered())
	if wait(r.Context(), p.delay) != nil {
		return
	}
	if p.fail != nil {
		writeOpenAIError(w, p.fail)
		return
	}
	id := fmt.Sprintf("chatcmpl-dex-%d", p.seq)
	calls := chatToolCalls(p)
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	usage := chatUsage(p.out)
	if !req.Stream {
		var content any
		if p.out.Text != "" {
			content = p.out.Text
		}
		msg := map[string]any{"role": "assistant", "content": content, "refusal": nil}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": now(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}
	out := startSSE(w)
	created := now()
	chunk := func(delta map[string]any, finish any) {
		out.event("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, piece := range pieces(p.out.Text, 8) {
		chunk(map[string]any{"content": piece}, nil)
	}
	for i, c := range calls {
		fn := c["function"].(map[string]any)
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": ""},
		}}}, nil)
		for _, piece := range pieces(fn["arguments"].(string), 8) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": piece},
			}}}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		out.event("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{}, "usage": usage,
		})
	}
	out.raw("[DONE]")
}

// chatToolCalls renders the output's tool calls as Chat Completions tool_calls.
func chatToolCalls(p plan) []map[string]any {
	var calls []map[string]any
	for i, c := range p.out.ToolCalls {
		calls = append(calls, map[string]any{
			"id": fmt.Sprintf("call_dex_%d_%d", p.seq, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.args()},
		})
	}
	return calls
}

func chatUsage(o Output) map[string]any {
	n := len(o.Text)
	for _, c := range o.ToolCalls {
		n += len(c.Name) + len(c.args())
	}
	return map[string]any{"prompt_tokens": 10, "completion_tokens": tokens(n), "total_tokens": 10 + tokens(n)}
}
