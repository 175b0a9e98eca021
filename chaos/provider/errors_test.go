package provider

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestScriptedErrors_OpenAIRetriesThenAnswer(t *testing.T) {
	s, h := newTestServer(t)
	req := `{"model":"m1","messages":[{"role":"user","content":"a flaky call"}]}`
	for attempt := 1; attempt <= 2; attempt++ {
		status, hdr, body := post(t, h.URL+"/v1/chat/completions", req)
		if status != http.StatusTooManyRequests || hdr.Get("Retry-After") != "1" {
			t.Fatalf("attempt %d: status %d, Retry-After %q", attempt, status, hdr.Get("Retry-After"))
		}
		sameJSON(t, "error", string(body), `{"error":{
			"message":"dex provider: scripted error 429 (attempt `+string(rune('0'+attempt))+` of 2)",
			"type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	}
	if status, _, body := post(t, h.URL+"/v1/chat/completions", req); status != http.StatusOK {
		t.Fatalf("attempt 3: status %d: %s", status, body)
	}
	calls := s.Calls()
	if len(calls) != 3 || calls[0].Status != 429 || calls[1].Status != 429 || calls[2].Status != 200 {
		t.Errorf("recorded %+v", calls)
	}
}

func TestScriptedErrors_AnthropicBody(t *testing.T) {
	sc, err := ParseScript([]byte(`{"turns":[{"contains":"x","outputs":[{"text":"y"}],
		"errors":[{"output":0,"status":529},{"output":0,"status":500},{"output":0,"status":400,"message":"bad"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := New(sc)
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`
	for i, want := range []struct {
		status int
		typ    string
	}{{529, "overloaded_error"}, {500, "api_error"}, {400, "invalid_request_error"}} {
		status, _, body := post(t, url+"/v1/messages", req)
		if status != want.status {
			t.Fatalf("call %d: status %d: %s", i+1, status, body)
		}
		msg := map[int]string{529: "dex provider: scripted error 529 (attempt 1 of 1)",
			500: "dex provider: scripted error 500 (attempt 1 of 1)", 400: "bad"}[want.status]
		sameJSON(t, "error", string(body), `{"type":"error","error":{"type":"`+want.typ+`","message":"`+msg+`"},
			"request_id":"req_dex_`+string(rune('1'+i))+`"}`)
	}
	if status, _, body := post(t, url+"/v1/messages", req); status != http.StatusOK {
		t.Fatalf("call 4: status %d: %s", status, body)
	}
}

func TestUnmatchedAndExhausted(t *testing.T) {
	s, h := newTestServer(t)
	status, _, body := post(t, h.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"nothing scripted"}]}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "no script turn matches") {
		t.Errorf("unmatched: status %d: %s", status, body)
	}
	status, _, body = post(t, h.URL+"/v1/chat/completions", `{"model":"m","messages":[
		{"role":"user","content":"hello"},{"role":"assistant","content":"Hi there!"}]}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "already holds 1 answers") {
		t.Errorf("exhausted: status %d: %s", status, body)
	}
	if calls := s.Calls(); len(calls) != 2 || calls[0].Turn != -1 || calls[1].Status != 400 {
		t.Errorf("recorded %+v", calls)
	}
}

func TestDelay(t *testing.T) {
	sc, _ := ParseScript([]byte(`{"turns":[{"prefix":"slow","delay_ms":100,"outputs":[{"text":"done","delay_ms":50}]}]}`))
	s, _ := New(sc)
	h := httpServer(t, s)
	start := time.Now()
	if status, _, body := post(t, h+"/v1/messages", `{"model":"c","messages":[{"role":"user","content":"slow one"}]}`); status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("answered after %v, want at least 150ms", d)
	}
}

func httpServer(t *testing.T, s *Server) string {
	t.Helper()
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return url
}
