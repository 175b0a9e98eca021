package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// responsesRequest is the part of a Responses API request the server reads.
type responsesRequest struct {
	Model              string          `json:"model"`
	Stream             bool            `json:"stream"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	PreviousResponseID string          `json:"previous_response_id"`
	Tools              json.RawMessage `json:"tools"`
}

// offered names the tools the request offers (a function tool's name; a
// built-in tool has none).
func (r *responsesRequest) offered() []string {
	var tools []struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(r.Tools, &tools)
	var names []string
	for _, t := range tools {
		if t.Name != "" {
			names = append(names, t.Name)
		}
	}
	return names
}

type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// conversation reads the input items, after the conversation of the previous
// response when the request names one.
func (s *Server) responsesConversation(r *responsesRequest) conversation {
	var b builder
	if r.PreviousResponseID != "" {
		s.mu.Lock()
		prev, ok := s.responses[r.PreviousResponseID]
		s.mu.Unlock()
		if ok {
			b.c, b.seenUser = prev, true
		}
	}
	var text string
	if json.Unmarshal(r.Input, &text) == nil {
		b.user(text)
		return b.c
	}
	var items []responsesItem
	_ = json.Unmarshal(r.Input, &items)
	for _, it := range items {
		switch {
		case (it.Type == "" || it.Type == "message") && it.Role == "user":
			t, _ := textOf(it.Content)
			b.user(t)
		case (it.Type == "" || it.Type == "message") && it.Role == "assistant",
			it.Type == "function_call", it.Type == "reasoning":
			b.assistant()
		default:
			b.other()
		}
	}
	return b.c
}

// responsesAPI serves POST /v1/responses.
func (s *Server) responsesAPI(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if err := decode(r, &req); err != nil {
		writeOpenAIError(w, &failure{status: http.StatusBadRequest, message: err.Error()})
		return
	}
	c := s.responsesConversation(&req)
	p := s.decide("responses", req.Model, req.Stream, c, req.offered())
	if wait(r.Context(), p.delay) != nil {
		return
	}
	if p.fail != nil {
		writeOpenAIError(w, p.fail)
		return
	}
	id := fmt.Sprintf("resp_dex_%d", p.seq)
	c.answered++
	s.mu.Lock()
	s.responses[id] = c
	s.mu.Unlock()

	items := responsesOutput(p)
	resp := func(status string, output []any, usage any) map[string]any {
		tools := req.Tools
		if len(tools) == 0 {
			tools = json.RawMessage("[]")
		}
		var prev any
		if req.PreviousResponseID != "" {
			prev = req.PreviousResponseID
		}
		return map[string]any{
			"id": id, "object": "response", "created_at": now(), "status": status, "model": req.Model,
			"output": output, "error": nil, "incomplete_details": nil, "instructions": req.Instructions,
			"parallel_tool_calls": true, "tool_choice": "auto", "tools": tools,
			"previous_response_id": prev, "usage": usage,
		}
	}
	usage := responsesUsage(p.out)
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp("completed", items, usage))
		return
	}
	out := startSSE(w)
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		out.event(typ, fields)
	}
	emit("response.created", map[string]any{"response": resp("in_progress", []any{}, nil)})
	emit("response.in_progress", map[string]any{"response": resp("in_progress", []any{}, nil)})
	for i, item := range items {
		it := item.(map[string]any)
		itemID := it["id"]
		switch it["type"] {
		case "message":
			emit("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"type": "message", "id": itemID, "status": "in_progress", "role": "assistant", "content": []any{},
			}})
			emit("response.content_part.added", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, piece := range pieces(p.out.Text, 8) {
				emit("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
					"delta": piece, "logprobs": []any{}})
			}
			emit("response.output_text.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"text": p.out.Text, "logprobs": []any{}})
			emit("response.content_part.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"part": it["content"].([]any)[0]})
		case "function_call":
			emit("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"type": "function_call", "id": itemID, "call_id": it["call_id"], "name": it["name"],
				"arguments": "", "status": "in_progress",
			}})
			for _, piece := range pieces(it["arguments"].(string), 8) {
				emit("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": piece})
			}
			emit("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": i,
				"name": it["name"], "arguments": it["arguments"]})
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	emit("response.completed", map[string]any{"response": resp("completed", items, usage)})
}

// responsesOutput renders the output as Responses API output items: the text
// as one assistant message, then one function_call item per tool call.
func responsesOutput(p plan) []any {
	items := []any{}
	if p.out.Text != "" {
		items = append(items, map[string]any{
			"type": "message", "id": fmt.Sprintf("msg_dex_%d", p.seq), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": p.out.Text, "annotations": []any{}}},
		})
	}
	for i, c := range p.out.ToolCalls {
		items = append(items, map[string]any{
			"type": "function_call", "id": fmt.Sprintf("fc_dex_%d_%d", p.seq, i),
			"call_id": fmt.Sprintf("call_dex_%d_%d", p.seq, i), "name": c.Name, "arguments": c.args(),
			"status": "completed",
		})
	}
	return items
}

func responsesUsage(o Output) map[string]any {
	u := chatUsage(o)
	return map[string]any{
		"input_tokens": u["prompt_tokens"], "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": u["completion_tokens"], "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": u["total_tokens"],
	}
}
