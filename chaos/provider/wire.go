package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// writeJSON answers with one JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes a text/event-stream, flushing each event as it goes.
type sse struct {
	w http.ResponseWriter
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

// event writes "event: NAME" (when name is set) and "data: JSON".
func (s *sse) event(name string, v any) {
	b, _ := json.Marshal(v)
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.flush()
}

// raw writes "data: TEXT" as it is (the Chat Completions stream ends with
// data: [DONE]).
func (s *sse) raw(text string) {
	fmt.Fprintf(s.w, "data: %s\n\n", text)
	s.flush()
}

func (s *sse) flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// pieces splits s into chunks of at most n bytes, never inside a UTF-8
// character, so a stream carries several deltas.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !startsRune(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func startsRune(b byte) bool { return b&0xC0 != 0x80 }

// now is the created timestamp of every answer, in Unix seconds.
func now() int64 { return time.Now().Unix() }

// usage is a rough token count: about four bytes a token, at least one.
func tokens(n int) int { return n/4 + 1 }
