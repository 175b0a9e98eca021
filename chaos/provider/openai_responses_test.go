package provider

import (
	"net/http"
	"testing"
)

func TestResponses_ToolCallThenText(t *testing.T) {
	s, h := newTestServer(t)
	url := h.URL + "/v1/responses"

	status, _, body := post(t, url, `{"model":"m1","instructions":"be brief",
		"input":[{"role":"user","content":"weather in Paris?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	sameJSON(t, "function call", string(body), `{
		"id":"resp_dex_1","object":"response","status":"completed","model":"m1",
		"output":[{"type":"function_call","id":"fc_dex_1_0","call_id":"call_dex_1_0",
			"name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"}],
		"error":null,"incomplete_details":null,"instructions":"be brief",
		"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"previous_response_id":null,
		"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},
			"output_tokens":7,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":17}}`)

	// The whole conversation resent, as a stateless framework does.
	status, _, body = post(t, url, `{"model":"m1","input":[
		{"type":"message","role":"user","content":[{"type":"input_text","text":"weather in Paris?"}]},
		{"type":"function_call","call_id":"call_dex_1_0","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"call_dex_1_0","output":"sunny"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	sameJSON(t, "text", string(body), `{
		"id":"resp_dex_2","object":"response","status":"completed","model":"m1",
		"output":[{"type":"message","id":"msg_dex_2","status":"completed","role":"assistant",
			"content":[{"type":"output_text","text":"Sunny, 21 C.","annotations":[]}]}],
		"error":null,"incomplete_details":null,"instructions":null,
		"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"previous_response_id":null,
		"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},
			"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":14}}`)

	if n := s.CallsPerConversation()["weather in Paris?"]; n != 2 {
		t.Errorf("the conversation made %d calls, want 2", n)
	}
}

func TestResponses_PreviousResponseID(t *testing.T) {
	_, h := newTestServer(t)
	url := h.URL + "/v1/responses"
	if status, _, body := post(t, url, `{"model":"m1","input":"weather?"}`); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	// Only the tool's result, after the stored response.
	status, _, body := post(t, url, `{"model":"m1","previous_response_id":"resp_dex_1",
		"input":[{"type":"function_call_output","call_id":"call_dex_1_0","output":"sunny"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	sameJSON(t, "text", string(body), `{
		"id":"resp_dex_2","object":"response","status":"completed","model":"m1",
		"output":[{"type":"message","id":"msg_dex_2","status":"completed","role":"assistant",
			"content":[{"type":"output_text","text":"Sunny, 21 C.","annotations":[]}]}],
		"error":null,"incomplete_details":null,"instructions":null,
		"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"previous_response_id":"resp_dex_1",
		"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},
			"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":14}}`)
}

func TestResponses_StreamToolCall(t *testing.T) {
	_, h := newTestServer(t)
	_, _, body := post(t, h.URL+"/v1/responses", `{"model":"m1","stream":true,"input":"weather?"}`)
	inProgress := `{"id":"resp_dex_1","object":"response","status":"in_progress","model":"m1","output":[],
		"error":null,"incomplete_details":null,"instructions":null,"parallel_tool_calls":true,
		"tool_choice":"auto","tools":[],"previous_response_id":null,"usage":null}`
	call := `{"type":"function_call","id":"fc_dex_1_0","call_id":"call_dex_1_0","name":"get_weather",
		"arguments":"{\"city\":\"Paris\"}","status":"completed"}`
	sameStream(t, readSSE(t, body), []sseEvent{
		{"response.created", `{"type":"response.created","sequence_number":0,"response":` + inProgress + `}`},
		{"response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":` + inProgress + `}`},
		{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,
			"item":{"type":"function_call","id":"fc_dex_1_0","call_id":"call_dex_1_0","name":"get_weather","arguments":"","status":"in_progress"}}`},
		{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":3,
			"item_id":"fc_dex_1_0","output_index":0,"delta":"{\"city\":"}`},
		{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":4,
			"item_id":"fc_dex_1_0","output_index":0,"delta":"\"Paris\"}"}`},
		{"response.function_call_arguments.done", `{"type":"response.function_call_arguments.done","sequence_number":5,
			"item_id":"fc_dex_1_0","output_index":0,"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`},
		{"response.output_item.done", `{"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":` + call + `}`},
		{"response.completed", `{"type":"response.completed","sequence_number":7,"response":{
			"id":"resp_dex_1","object":"response","status":"completed","model":"m1","output":[` + call + `],
			"error":null,"incomplete_details":null,"instructions":null,"parallel_tool_calls":true,
			"tool_choice":"auto","tools":[],"previous_response_id":null,
			"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},
				"output_tokens":7,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":17}}}`},
	})
}

func TestResponses_StreamText(t *testing.T) {
	_, h := newTestServer(t)
	_, _, body := post(t, h.URL+"/v1/responses", `{"model":"m1","stream":true,"input":"hello"}`)
	events := readSSE(t, body)
	part := `{"type":"output_text","text":"Hi there!","annotations":[]}`
	msg := `{"type":"message","id":"msg_dex_1","status":"completed","role":"assistant","content":[` + part + `]}`
	want := []sseEvent{
		{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,
			"item":{"type":"message","id":"msg_dex_1","status":"in_progress","role":"assistant","content":[]}}`},
		{"response.content_part.added", `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_dex_1",
			"output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_dex_1",
			"output_index":0,"content_index":0,"delta":"Hi there","logprobs":[]}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_dex_1",
			"output_index":0,"content_index":0,"delta":"!","logprobs":[]}`},
		{"response.output_text.done", `{"type":"response.output_text.done","sequence_number":6,"item_id":"msg_dex_1",
			"output_index":0,"content_index":0,"text":"Hi there!","logprobs":[]}`},
		{"response.content_part.done", `{"type":"response.content_part.done","sequence_number":7,"item_id":"msg_dex_1",
			"output_index":0,"content_index":0,"part":` + part + `}`},
		{"response.output_item.done", `{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":` + msg + `}`},
	}
	if len(events) != 10 {
		t.Fatalf("%d events, want 10: %v", len(events), events)
	}
	sameStream(t, events[2:9], want)
	if events[9].Name != "response.completed" {
		t.Errorf("the last event is %q, want response.completed", events[9].Name)
	}
}
