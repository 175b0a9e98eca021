package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// fakeAnthropic answers every /v1/messages request with status and answer
// (JSON) and keeps the request bodies.
func fakeAnthropic(t *testing.T, status int, answer string) (*Anthropic, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			t.Errorf("request %s %s, want POST /v1/messages", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("x-api-key"); got != "test-key" {
			t.Errorf("x-api-key %q", got)
		}
		if got := r.Header.Get("anthropic-version"); got != "2023-06-01" {
			t.Errorf("anthropic-version %q", got)
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("content-type", "application/json")
		if status == http.StatusTooManyRequests {
			w.Header().Set("retry-after", "30")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return &Anthropic{BaseURL: srv.URL, APIKey: "test-key", Model: "claude-test", MaxTokens: 1024, HTTP: srv.Client()}, &bodies
}

// sameJSON fails the test unless got and want are the same JSON value.
func sameJSON(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: the expected JSON: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

var offered = []*dexv1.ToolSpec{
	{Name: "lookup_order", Description: "Looks an order up.", Access: dexv1.ToolAccess_TOOL_ACCESS_READ},
	{Name: "send_invoice", Description: "Sends an invoice.", Access: dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE},
}

// A session's history goes out as Anthropic's messages, and an answer with
// a tool_use block comes back as a Dex tool call.
func TestRunModelToolUse(t *testing.T) {
	m, bodies := fakeAnthropic(t, 200, `{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
		"content": [
			{"type": "text", "text": "Sending it."},
			{"type": "tool_use", "id": "toolu_2", "name": "send_invoice", "input": {"order_id": "A-1001", "amount_cents": 1250}}
		],
		"stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}`)
	history := []*dexv1.HistoryEntry{
		{Kind: dexv1.HistoryKind_HISTORY_KIND_SUMMARY, Text: "Ada asked about A-1001."},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "certify 1: call send_invoice"},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: "Checking.", ToolCalls: []*dexv1.ToolCall{
			{CallId: "toolu_1", Tool: "lookup_order", Arguments: `{"order_id": "A-1001"}`},
			{CallId: "toolu_1b", Tool: "charge_card", Arguments: ``},
		}},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "toolu_1", Tool: "lookup_order", Text: `{"status":"delivered"}`, Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "toolu_1b", Tool: "charge_card", Text: "may have run", Outcome: dexv1.Outcome_OUTCOME_UNKNOWN},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_NOTE, Text: "Do not repeat charge_card."},
	}
	out, err := m.RunModel(context.Background(), client.ModelInput{History: history, Tools: offered})
	if err != nil {
		t.Fatal(err)
	}
	if len(*bodies) != 1 {
		t.Fatalf("%d requests, want 1", len(*bodies))
	}
	sameJSON(t, "request", (*bodies)[0], `{
		"model": "claude-test", "max_tokens": 1024,
		"system": "`+systemPrompt+`\n\nSummary of the conversation so far: Ada asked about A-1001.\n\nDo not repeat charge_card.",
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "certify 1: call send_invoice"}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Checking."},
				{"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {"order_id": "A-1001"}},
				{"type": "tool_use", "id": "toolu_1b", "name": "charge_card", "input": {}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"status\":\"delivered\"}"},
				{"type": "tool_result", "tool_use_id": "toolu_1b", "content": "may have run", "is_error": true}]}
		],
		"tools": [
			{"name": "lookup_order", "description": "Looks an order up.", "input_schema": {"type": "object"}},
			{"name": "send_invoice", "description": "Sends an invoice.", "input_schema": {"type": "object"}}
		]}`)
	if out.Text != "Sending it." {
		t.Errorf("text %q", out.Text)
	}
	if u := out.Usage; u.GetInputTokens() != 10 || u.GetOutputTokens() != 5 || u.GetModel() != "claude-test" {
		t.Errorf("usage %v, want the answer's 10 + 5 tokens of claude-test", u)
	}
	if len(out.ToolCalls) != 1 {
		t.Fatalf("tool calls %v, want one", out.ToolCalls)
	}
	c := out.ToolCalls[0]
	if c.CallId != "toolu_2" || c.Tool != "send_invoice" {
		t.Errorf("tool call %v", c)
	}
	sameJSON(t, "arguments", c.Arguments, `{"order_id": "A-1001", "amount_cents": 1250}`)
}

// A text answer is the output's text, without tool calls; a user message
// after tool results is a message of its own.
func TestRunModelText(t *testing.T) {
	m, bodies := fakeAnthropic(t, 200, `{"id": "msg_2", "type": "message", "role": "assistant",
		"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}`)
	history := []*dexv1.HistoryEntry{
		{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "certify 2: call send_invoice"},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, ToolCalls: []*dexv1.ToolCall{
			{CallId: "toolu_3", Tool: "send_invoice", Arguments: `{"order_id":"A-1001","amount_cents":1250}`},
		}},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "toolu_3", Tool: "send_invoice", Text: "invoice INV-0001 sent", Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "and then?"},
	}
	out, err := m.RunModel(context.Background(), client.ModelInput{History: history})
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "done" || len(out.ToolCalls) != 0 {
		t.Errorf("output %v, want the text done alone", out)
	}
	sameJSON(t, "request", (*bodies)[0], `{
		"model": "claude-test", "max_tokens": 1024, "system": "`+systemPrompt+`",
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "certify 2: call send_invoice"}]},
			{"role": "assistant", "content": [
				{"type": "tool_use", "id": "toolu_3", "name": "send_invoice", "input": {"order_id": "A-1001", "amount_cents": 1250}}]},
			{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_3", "content": "invoice INV-0001 sent"}]},
			{"role": "user", "content": [{"type": "text", "text": "and then?"}]}
		]}`)
}

// A history that starts with the model's answer (after a compaction) gets a
// user message first, and a result whose call is not there becomes text.
func TestToMessagesAfterCompaction(t *testing.T) {
	_, msgs := toMessages([]*dexv1.HistoryEntry{
		{Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "toolu_0", Tool: "lookup_order", Text: "found", Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: "Found it."},
	})
	b, _ := json.Marshal(msgs)
	sameJSON(t, "messages", string(b), `[
		{"role": "user", "content": [{"type": "text", "text": "(Result of an earlier lookup_order call toolu_0: found)"}]},
		{"role": "assistant", "content": [{"type": "text", "text": "Found it."}]}]`)
}

// The provider's error statuses become the library's error types, which
// decide whether the cluster retries.
func TestRunModelErrors(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   dexv1.ErrorType
	}{
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, dexv1.ErrorType_ERROR_TYPE_OVERLOADED},
		{500, `{"type":"error","error":{"type":"api_error","message":"boom"}}`, dexv1.ErrorType_ERROR_TYPE_SERVER_ERROR},
		{503, `upstream unavailable`, dexv1.ErrorType_ERROR_TYPE_SERVER_ERROR},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: bad"}}`, dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}`, dexv1.ErrorType_ERROR_TYPE_CONTEXT_LENGTH},
	} {
		m, _ := fakeAnthropic(t, c.status, c.body)
		_, err := m.RunModel(context.Background(), client.ModelInput{History: []*dexv1.HistoryEntry{{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "hi"}}})
		if err == nil {
			t.Fatalf("HTTP %d: no error", c.status)
		}
		if got := client.ClassifyError(err); got != c.want {
			t.Errorf("HTTP %d: error type %s, want %s (%v)", c.status, got, c.want, err)
		}
		if !strings.Contains(err.Error(), "HTTP ") {
			t.Errorf("HTTP %d: error %q does not say the status", c.status, err)
		}
		if d := client.RetryAfterOf(err); c.status == 429 && (d < 29*time.Second || d > 30*time.Second) {
			t.Errorf("HTTP 429 with retry-after: 30: Retry-After %s, want 30 s", d)
		}
	}
	// Nobody listening: a network error.
	m := &Anthropic{BaseURL: "http://127.0.0.1:1", APIKey: "k", Model: "m", MaxTokens: 1, HTTP: http.DefaultClient}
	_, err := m.RunModel(context.Background(), client.ModelInput{History: []*dexv1.HistoryEntry{{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "hi"}}})
	if got := client.ClassifyError(err); got != dexv1.ErrorType_ERROR_TYPE_NETWORK {
		t.Errorf("refused connection: error type %s (%v)", got, err)
	}
}

// Compact sends the history with a request for a summary and returns the
// answer's text.
func TestCompact(t *testing.T) {
	m, bodies := fakeAnthropic(t, 200, `{"content": [{"type": "text", "text": "Ada was invoiced."}], "stop_reason": "end_turn"}`)
	s, err := m.Compact(context.Background(), client.ModelInput{Compact: true, History: []*dexv1.HistoryEntry{
		{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "invoice A-1001"},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: "Sent."},
	}})
	if err != nil || s != "Ada was invoiced." {
		t.Fatalf("summary %q, %v", s, err)
	}
	var req messagesRequest
	if err := json.Unmarshal([]byte((*bodies)[0]), &req); err != nil {
		t.Fatal(err)
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role != "user" || last.Content[0].Text != compactPrompt || len(req.Tools) != 0 {
		t.Errorf("compaction request %s", (*bodies)[0])
	}
}

func handler(t *testing.T, store *InvoiceStore, name string) client.ToolHandler {
	t.Helper()
	for _, tl := range Tools(store) {
		if tl.Spec.Name == name {
			return tl.Run
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// send_invoice with the same idempotency key twice sends one invoice; the
// second call answers the first invoice.
func TestSendInvoiceOncePerKey(t *testing.T) {
	store := &InvoiceStore{Path: filepath.Join(t.TempDir(), "invoices.json")}
	send := handler(t, store, "send_invoice")
	call := client.ToolCall{Tool: "send_invoice", IdempotencyKey: "ses-1/step-3/toolu_2", Attempt: 1,
		Arguments: `{"order_id": "A-1001", "amount_cents": 1250}`}
	first, err := send(context.Background(), call)
	if err != nil || first.IsError || !strings.Contains(first.Content, "INV-0001 sent") {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	call.Attempt = 2
	again, err := send(context.Background(), call)
	if err != nil || again.IsError || !strings.Contains(again.Content, "INV-0001") || !strings.Contains(again.Content, "already") {
		t.Fatalf("second call: %+v, %v", again, err)
	}
	invoices, _, err := store.Read()
	if err != nil || len(invoices) != 1 {
		t.Fatalf("invoices %v, %v; want one", invoices, err)
	}
	// Another call (another key) is another invoice.
	call.IdempotencyKey = "ses-1/step-9/toolu_5"
	if res, err := send(context.Background(), call); err != nil || !strings.Contains(res.Content, "INV-0002 sent") {
		t.Fatalf("another key: %+v, %v", res, err)
	}
	// lookup_order reads the invoices.
	res, err := handler(t, store, "lookup_order")(context.Background(), client.ToolCall{Tool: "lookup_order", Arguments: `{"order_id": "A-1001"}`})
	if err != nil {
		t.Fatal(err)
	}
	var order struct {
		Status   string   `json:"status"`
		Invoices []string `json:"invoices"`
	}
	if err := json.Unmarshal([]byte(res.Content), &order); err != nil || order.Status != "delivered" || len(order.Invoices) != 2 {
		t.Errorf("lookup_order: %s (%v)", res.Content, err)
	}
}

// Worker processes that share the store (a killed Worker's attempt and its
// replacement's) still send one invoice per key.
func TestSendInvoiceSharedStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "invoices.json")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A store of its own: its own open file, as another process has.
			s := &InvoiceStore{Path: path}
			if _, _, err := s.SendInvoice("key-"+string(rune('a'+i%2)), "A-1001", 1250); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	invoices, _, err := (&InvoiceStore{Path: path}).Read()
	if err != nil || len(invoices) != 2 {
		t.Fatalf("invoices %v, %v; want two", invoices, err)
	}
}

// A call without a key fails rather than send an invoice every retry would
// send again; charge_card charges on every call; bad arguments are an
// error result.
func TestToolEdges(t *testing.T) {
	store := &InvoiceStore{Path: filepath.Join(t.TempDir(), "invoices.json")}
	if _, err := handler(t, store, "send_invoice")(context.Background(), client.ToolCall{Tool: "send_invoice", Arguments: `{}`}); err == nil {
		t.Error("send_invoice without an idempotency key went through")
	}
	charge := handler(t, store, "charge_card")
	for range 2 {
		if _, err := charge(context.Background(), client.ToolCall{Tool: "charge_card", Arguments: `{"order_id": "A-1001", "amount_cents": 1250}`}); err != nil {
			t.Fatal(err)
		}
	}
	if _, charges, err := store.Read(); err != nil || len(charges) != 2 {
		t.Errorf("charges %v, %v; want two", charges, err)
	}
	res, err := charge(context.Background(), client.ToolCall{Tool: "charge_card", Arguments: `not json`})
	if err != nil || !res.IsError {
		t.Errorf("bad arguments: %+v, %v; want an error result", res, err)
	}
}
