package provider

import (
	"net/http"
	"testing"
)

func TestChatCompletions_ToolCallThenText(t *testing.T) {
	s, h := newTestServer(t)
	url := h.URL + "/v1/chat/completions"

	status, _, body := post(t, url, `{"model":"m1","messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":"what is the weather in Paris?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	sameJSON(t, "tool call", string(body), `{
		"id":"chatcmpl-dex-1","object":"chat.completion","model":"m1",
		"choices":[{"index":0,"logprobs":null,"finish_reason":"tool_calls",
			"message":{"role":"assistant","content":null,"refusal":null,
				"tool_calls":[{"id":"call_dex_1_0","type":"function",
					"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}],
		"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17}}`)

	// The framework resends the conversation with the call and its result.
	status, _, body = post(t, url, `{"model":"m1","messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"what is the weather in Paris?"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_dex_1_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_dex_1_0","content":"sunny"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	sameJSON(t, "text", string(body), `{
		"id":"chatcmpl-dex-2","object":"chat.completion","model":"m1",
		"choices":[{"index":0,"logprobs":null,"finish_reason":"stop",
			"message":{"role":"assistant","content":"Sunny, 21 C.","refusal":null}}],
		"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}`)

	if n := s.CallsPerConversation()["what is the weather in Paris?"]; n != 2 {
		t.Errorf("the conversation made %d calls, want 2", n)
	}
}

func TestChatCompletions_StreamToolCall(t *testing.T) {
	_, h := newTestServer(t)
	status, hdr, body := post(t, h.URL+"/v1/chat/completions", `{"model":"m1","stream":true,
		"stream_options":{"include_usage":true},
		"messages":[{"role":"user","content":"weather?"}]}`)
	if status != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q: %s", status, hdr.Get("Content-Type"), body)
	}
	head := `"id":"chatcmpl-dex-1","object":"chat.completion.chunk","model":"m1"`
	sameStream(t, readSSE(t, body), []sseEvent{
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`},
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_dex_1_0","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`},
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}]}`},
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}`},
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`},
		{Data: `{` + head + `,"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17}}`},
		{Data: `[DONE]`},
	})
}

func TestChatCompletions_StreamText(t *testing.T) {
	_, h := newTestServer(t)
	_, _, body := post(t, h.URL+"/v1/chat/completions", `{"model":"m1","stream":true,
		"messages":[{"role":"user","content":"hello, model"}]}`)
	head := `"id":"chatcmpl-dex-1","object":"chat.completion.chunk","model":"m1"`
	sameStream(t, readSSE(t, body), []sseEvent{
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`},
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{"content":"Hi there"},"logprobs":null,"finish_reason":null}]}`},
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":null}]}`},
		{Data: `{` + head + `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`},
		{Data: `[DONE]`},
	})
}
