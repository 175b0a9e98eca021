package provider

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestReadTranscript(t *testing.T) {
	for _, c := range []struct {
		text string
		want transcript
	}{
		{"User: weather in Paris?", transcript{"weather in Paris?", "weather in Paris?", 0}},
		{"User: weather?\nAssistant called get_weather (toolu_1) with {\"city\":\"Paris\"}\nResult of get_weather (toolu_1): sunny",
			transcript{"weather?", "weather?", 1}},
		// Text and calls of one output are one turn; an error result ends it too.
		{"User: weather?\nAssistant: Looking.\nAssistant called get_weather (c1) with {}\nAssistant called get_time (c2) with {}\n" +
			"Result of get_weather (c1) [error]: down\nResult of get_time (c2): noon\nAssistant called get_weather (c3) with {}",
			transcript{"weather?", "weather?", 2}},
		// The last user line picks the row, counted from there.
		{"User: weather?\nAssistant: Sunny.\nUser: hello\nthere\nAssistant: Hi!",
			transcript{"weather?", "hello\nthere", 1}},
		// Lines of a user message of several lines, and a "Result of" line
		// that answers no call, are the user's.
		{"User: a list:\nResult of the vote (yes): 3\nAssistant called x (1) with {}\nResult of x (1): ok\nUser: again\nResult of y (2): z",
			transcript{"a list:\nResult of the vote (yes): 3", "again\nResult of y (2): z", 0}},
		// A tool result of several lines stays with its result.
		{"User: q\nAssistant called x (1) with {}\nResult of x (1): line 1\nline 2\nAssistant: done",
			transcript{"q", "q", 2}},
		// The Claude Code CLI's reminders around it are not the transcript's.
		{"<system-reminder>\n# Environment\nUser: no\n</system-reminder>\n<system-reminder>\nToday's date is 2026-12-02.\n</system-reminder>\n\n" +
			"User: q\nAssistant: a\n<system-reminder>\nlater\n</system-reminder>",
			transcript{"q", "q", 1}},
	} {
		got, ok := readTranscript(c.text)
		if !ok || got != c.want {
			t.Errorf("%q: got %+v (%v), want %+v", c.text, got, ok, c.want)
		}
	}
	for _, text := range []string{"weather?", "Tell the User: hi", "<system-reminder>x</system-reminder>weather?", "<system-reminder>User: hi", ""} {
		if _, ok := readTranscript(text); ok {
			t.Errorf("%q read as a transcript", text)
		}
	}
}

// cliRequest is a request as the Claude Code CLI (the Claude Agent SDK's)
// sends it for a query of Dex's claude-agent-sdk adapter: the Dex history as
// one user message (a transcript) after the CLI's reminders (its
// environment, the date), the "dex" MCP server's tools, streamed. after are
// the messages the CLI adds within the query.
func cliRequest(prompt string, after ...string) string {
	p, _ := json.Marshal(prompt)
	msgs := []string{`{"role":"user","content":[
		{"type":"text","text":"<system-reminder>\n# Environment\nYou have been invoked in the following environment: \n - Platform: linux\n</system-reminder>"},
		{"type":"text","text":"<system-reminder>\nToday's date is 2026-12-02.\n</system-reminder>\n"},
		{"type":"text","text":` + string(p) + `,"cache_control":{"type":"ephemeral"}}]}`}
	return `{"model":"claude-haiku-4-5","max_tokens":32000,"stream":true,
		"system":[{"type":"text","text":"You are a Claude agent, built on Anthropic's Claude Agent SDK."}],
		"tools":[{"name":"DeferredToolPlaceholder","input_schema":{"type":"object","properties":{}},"defer_loading":true},
			{"name":"mcp__dex__get_weather","description":"The weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
		"metadata":{"user_id":"x"},"messages":[` + strings.Join(append(msgs, after...), ",") + `]}`
}

// answerOf sends a streamed Messages request and reads the answer: its text
// and its tool calls (name and input).
func answerOf(t *testing.T, url, req string) (text string, calls []string) {
	t.Helper()
	status, _, body := post(t, url, req)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	for _, e := range readSSE(t, body) {
		var ev struct {
			Block struct{ Type, ID, Name string } `json:"content_block"`
			Delta struct {
				Type, Text  string
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Name == "content_block_start" && ev.Block.Type == "tool_use":
			calls = append(calls, ev.Block.Name+" ")
		case e.Name == "content_block_delta" && ev.Delta.Type == "input_json_delta":
			calls[len(calls)-1] += ev.Delta.PartialJSON
		case e.Name == "content_block_delta" && ev.Delta.Type == "text_delta":
			text += ev.Delta.Text
		}
	}
	return text, calls
}

// The exchange of a Dex session through the claude-agent-sdk adapter: each
// RunModel is one query of the CLI, whose prompt is the Dex history as a
// transcript. The first query gets the tool call, under the MCP name the CLI
// offers; the adapter's PreToolUse hook defers it and the CLI ends the query
// there (it sends no tool_result for a deferred call). Dex runs the tool; the
// next RunModel's transcript holds the call and its result, and gets the
// row's next output instead of the tool call again. A query that goes on
// after a call the CLI ran itself (an MCP tool not deferred) sends the
// assistant message and its tool_result after the transcript: they count as
// one more answer.
func TestMessages_ClaudeAgentSdkTranscript(t *testing.T) {
	s, h := newTestServer(t)
	url := h.URL + "/v1/messages?beta=true"

	text, calls := answerOf(t, url, cliRequest("User: weather in Paris?"))
	if text != "" || len(calls) != 1 || calls[0] != `mcp__dex__get_weather {"city":"Paris"}` {
		t.Fatalf("the first query got %q %q, want the tool call", text, calls)
	}

	// Within the same query, after the CLI ran the call itself.
	text, calls = answerOf(t, url, cliRequest("User: weather in Paris?",
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_dex_1_0","name":"mcp__dex__get_weather","input":{"city":"Paris"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_dex_1_0","content":[{"type":"text","text":"sunny"}]}]}`))
	if text != "Sunny, 21 C." || len(calls) != 0 {
		t.Errorf("the query's follow-up got %q %q, want the row's next output", text, calls)
	}

	// The next RunModel: a new query on the history with the call's result.
	history := "User: weather in Paris?\n" +
		`Assistant called get_weather (toolu_dex_1_0) with {"city":"Paris"}` + "\n" +
		"Result of get_weather (toolu_dex_1_0): sunny"
	text, calls = answerOf(t, url, cliRequest(history))
	if text != "Sunny, 21 C." || len(calls) != 0 {
		t.Errorf("the next query got %q %q, want the row's next output", text, calls)
	}

	// The session's next user message starts the "hello" row.
	text, _ = answerOf(t, url, cliRequest(history+"\nAssistant: Sunny, 21 C.\nUser: hello"))
	if text != "Hi there!" {
		t.Errorf("the next message got %q, want the hello row's", text)
	}

	// A transcript past the row's outputs is refused as any conversation is.
	status, _, body := post(t, url, cliRequest(history+"\nAssistant: Sunny, 21 C.\nAssistant called get_weather (c2) with {}"))
	if status != http.StatusBadRequest || !strings.Contains(string(body), "already holds 2 answers") {
		t.Errorf("past the outputs: status %d: %s", status, body)
	}

	// Every call is the conversation of the transcript's first user line.
	if n := s.CallsPerConversation(); n["weather in Paris?"] != 5 || len(n) != 1 {
		t.Errorf("calls per conversation %v, want 5 for %q", n, "weather in Paris?")
	}
	var users []string
	for _, c := range s.Calls() {
		users = append(users, c.User)
	}
	if want := "weather in Paris?,weather in Paris?,weather in Paris?,hello,weather in Paris?"; strings.Join(users, ",") != want {
		t.Errorf("the calls' user messages %q, want %s", users, want)
	}
}

// The rule is the conversation's, whatever the API.
func TestTranscript_EveryAPI(t *testing.T) {
	_, h := newTestServer(t)
	history := "User: weather?\nAssistant called get_weather (c1) with {\"city\":\"Paris\"}\nResult of get_weather (c1): sunny"
	h2, _ := json.Marshal(history)
	for api, req := range map[string][2]string{
		"chat":      {"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":` + string(h2) + `}]}`},
		"responses": {"/v1/responses", `{"model":"m","input":` + string(h2) + `}`},
	} {
		status, _, body := post(t, h.URL+req[0], req[1])
		if status != http.StatusOK || !strings.Contains(string(body), "Sunny, 21 C.") {
			t.Errorf("%s: status %d: %s, want the row's second output", api, status, body)
		}
	}
}
