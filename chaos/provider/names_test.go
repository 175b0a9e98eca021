package provider

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// calledName sends a request for the "weather" row's tool call, offering
// tools by those names, and returns the name the call came back under.
func calledName(t *testing.T, url, api string, offered []string) string {
	t.Helper()
	var tools []string
	for _, n := range offered {
		switch api {
		case "chat":
			tools = append(tools, `{"type":"function","function":{"name":"`+n+`","parameters":{"type":"object"}}}`)
		case "responses":
			tools = append(tools, `{"type":"function","name":"`+n+`","parameters":{"type":"object"}}`)
		case "messages":
			tools = append(tools, `{"name":"`+n+`","input_schema":{"type":"object"}}`)
		}
	}
	list := "[" + strings.Join(tools, ",") + "]"
	var path, body string
	switch api {
	case "chat":
		path, body = "/v1/chat/completions", `{"model":"m1","tools":`+list+`,"messages":[{"role":"user","content":"weather?"}]}`
	case "responses":
		path, body = "/v1/responses", `{"model":"m1","tools":`+list+`,"input":"weather?"}`
	case "messages":
		path, body = "/v1/messages", `{"model":"m1","max_tokens":10,"tools":`+list+`,"messages":[{"role":"user","content":"weather?"}]}`
	}
	status, _, b := post(t, url+path, body)
	if status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", api, status, b)
	}
	var r struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Output  []struct{ Name string } `json:"output"`
		Content []struct{ Name string } `json:"content"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	switch {
	case len(r.Choices) > 0 && len(r.Choices[0].Message.ToolCalls) > 0:
		return r.Choices[0].Message.ToolCalls[0].Function.Name
	case len(r.Output) > 0:
		return r.Output[0].Name
	case len(r.Content) > 0:
		return r.Content[0].Name
	}
	t.Fatalf("%s: no tool call in %s", api, b)
	return ""
}

// A scripted call of a tool the request offers under a longer name (the
// Claude Code CLI offers an MCP server's tools as mcp__SERVER__NAME) comes
// back under the offered name, in every API; otherwise the script's name.
func TestToolCall_TakesTheOfferedName(t *testing.T) {
	_, h := newTestServer(t)
	for _, api := range []string{"chat", "responses", "messages"} {
		for _, c := range []struct {
			offered []string
			want    string
		}{
			{[]string{"DeferredToolPlaceholder", "mcp__dex__get_weather"}, "mcp__dex__get_weather"},
			{[]string{"get_weather", "mcp__dex__get_weather"}, "get_weather"},                            // offered as it is
			{[]string{"mcp__a__get_weather", "mcp__b__get_weather"}, "get_weather"},                      // two candidates
			{[]string{"mcp__dex__get_weather_v2", "dex_get_weather", "my__get_weathers"}, "get_weather"}, // no "__" + name ending
			{nil, "get_weather"},
		} {
			if got := calledName(t, h.URL, api, c.offered); got != c.want {
				t.Errorf("%s, tools %v: the call is named %q, want %q", api, c.offered, got, c.want)
			}
		}
	}
}

func TestToolCall_OfferedNameStreamed(t *testing.T) {
	sc, err := ParseScript([]byte(testScript))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	url := httpServer(t, s)
	_, _, body := post(t, url+"/v1/messages", `{"model":"m1","max_tokens":10,"stream":true,
		"tools":[{"name":"mcp__dex__get_weather","input_schema":{"type":"object"}}],
		"messages":[{"role":"user","content":"weather?"}]}`)
	events := readSSE(t, body)
	sameJSON(t, "the tool_use block", events[2].Data, `{"type":"content_block_start","index":0,
		"content_block":{"type":"tool_use","id":"toolu_dex_1_0","name":"mcp__dex__get_weather","input":{}}}`)
	// The script itself keeps its name for the next request.
	if got := sc.Turns[0].Outputs[0].ToolCalls[0].Name; got != "get_weather" {
		t.Errorf("the script's call was renamed to %q", got)
	}
}
