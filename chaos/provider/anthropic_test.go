package provider

import (
	"net/http"
	"testing"
)

func TestMessages_ToolUseThenText(t *testing.T) {
	s, h := newTestServer(t)
	url := h.URL + "/v1/messages"

	status, _, body := post(t, url, `{"model":"claude-x","max_tokens":100,"system":"be brief",
		"messages":[{"role":"user","content":"weather in Paris?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	sameJSON(t, "tool use", string(body), `{
		"id":"msg_dex_1","type":"message","role":"assistant","model":"claude-x",
		"content":[{"type":"tool_use","id":"toolu_dex_1_0","name":"get_weather","input":{"city":"Paris"}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":10,"output_tokens":7}}`)

	status, _, body = post(t, url, `{"model":"claude-x","max_tokens":100,"messages":[
		{"role":"user","content":[{"type":"text","text":"weather in Paris?"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_dex_1_0","name":"get_weather","input":{"city":"Paris"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_dex_1_0","content":"sunny"}]}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	sameJSON(t, "text", string(body), `{
		"id":"msg_dex_2","type":"message","role":"assistant","model":"claude-x",
		"content":[{"type":"text","text":"Sunny, 21 C."}],
		"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":10,"output_tokens":4}}`)

	if n := s.CallsPerConversation()["weather in Paris?"]; n != 2 {
		t.Errorf("the conversation made %d calls, want 2", n)
	}
}

func TestMessages_StreamToolUse(t *testing.T) {
	_, h := newTestServer(t)
	_, _, body := post(t, h.URL+"/v1/messages", `{"model":"claude-x","max_tokens":100,"stream":true,
		"messages":[{"role":"user","content":"weather?"}]}`)
	sameStream(t, readSSE(t, body), []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_dex_1","type":"message","role":"assistant",
			"model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,
			"usage":{"input_tokens":10,"output_tokens":1}}}`},
		{"ping", `{"type":"ping"}`},
		{"content_block_start", `{"type":"content_block_start","index":0,
			"content_block":{"type":"tool_use","id":"toolu_dex_1_0","name":"get_weather","input":{}}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})
}

func TestMessages_StreamText(t *testing.T) {
	_, h := newTestServer(t)
	_, _, body := post(t, h.URL+"/v1/messages", `{"model":"claude-x","max_tokens":100,"stream":true,
		"messages":[{"role":"user","content":"hello"}]}`)
	events := readSSE(t, body)
	if len(events) != 8 {
		t.Fatalf("%d events, want 8: %v", len(events), events)
	}
	sameStream(t, events[2:7], []sseEvent{
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`},
	})
}
