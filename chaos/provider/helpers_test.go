package provider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// testScript: a tool call then a text answer for "weather", a text answer for
// "hello", and a row whose first call fails twice with 429.
const testScript = `{"turns": [
 {"contains": "weather", "outputs": [
   {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
   {"text": "Sunny, 21 C."}]},
 {"prefix": "hello", "outputs": [{"text": "Hi there!"}]},
 {"contains": "flaky", "errors": [{"output": 0, "status": 429, "times": 2, "retry_after": 1}],
  "outputs": [{"text": "ok"}]}
]}`

func newTestServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	sc, err := ParseScript([]byte(testScript))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(s.Handler())
	t.Cleanup(h.Close)
	return s, h
}

// post sends a JSON body and returns the status, the headers and the body.
func post(t *testing.T, url, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// sseEvent is one event of a stream: its "event:" name (if any) and data.
type sseEvent struct {
	Name string
	Data string
}

func readSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" {
				events = append(events, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected stream line %q", line)
		}
	}
	return events
}

// sameJSON compares got with the expected JSON, ignoring the timestamps
// ("created", "created_at"), which change with the clock.
func sameJSON(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: not JSON: %v: %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: the expected text is not JSON: %v", what, err)
	}
	dropTimes(g)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func dropTimes(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "created")
		delete(v, "created_at")
		for _, x := range v {
			dropTimes(x)
		}
	case []any:
		for _, x := range v {
			dropTimes(x)
		}
	}
}

// sameStream compares a stream's events with the expected ones, one by one.
func sameStream(t *testing.T, got []sseEvent, want []sseEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d events, want %d: %v", len(got), len(want), got)
	}
	for i := range min(len(got), len(want)) {
		if got[i].Name != want[i].Name {
			t.Errorf("event %d is %q, want %q", i, got[i].Name, want[i].Name)
		}
		if want[i].Data == "[DONE]" || got[i].Data == "[DONE]" {
			if got[i].Data != want[i].Data {
				t.Errorf("event %d: %s, want %s", i, got[i].Data, want[i].Data)
			}
			continue
		}
		sameJSON(t, "event "+want[i].Name, got[i].Data, want[i].Data)
	}
}
