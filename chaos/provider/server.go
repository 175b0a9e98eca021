package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Server answers the providers' endpoints from a Script and records every call.
type Server struct {
	script *Script

	// Log, when set, gets one JSON line per call (a Call) as it is answered.
	Log io.Writer

	mu       sync.Mutex
	calls    []Call
	attempts map[attemptKey]int
	// responses maps a Responses API response id to the conversation it
	// answered, counting its own output, for requests that name it as
	// previous_response_id instead of resending the conversation.
	responses map[string]conversation

	http *http.Server
}

// Call is the record of one request.
type Call struct {
	Seq    int    `json:"seq"`
	API    string `json:"api"` // chat.completions, responses or messages
	Stream bool   `json:"stream"`
	Model  string `json:"model"`
	// Conversation is the conversation's first user message: it names the
	// conversation for counting its model calls.
	Conversation string `json:"conversation"`
	User         string `json:"user"`   // the last user message
	Turn         int    `json:"turn"`   // the script row, -1 when none matched
	Output       int    `json:"output"` // the row's output given (or failed)
	Status       int    `json:"status"` // the HTTP status answered
	Error        string `json:"error,omitempty"`
}

type attemptKey struct {
	conversation string
	turn, output int
}

// New returns a Server for a checked script.
func New(s *Script) (*Server, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &Server{script: s, attempts: map[attemptKey]int{}, responses: map[string]conversation{}}, nil
}

// Handler serves /v1/chat/completions, /v1/responses and /v1/messages.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("POST /v1/responses", s.responsesAPI)
	mux.HandleFunc("POST /v1/messages", s.messages)
	return mux
}

// Start listens on addr (such as 127.0.0.1:0) and serves in the background. It
// returns the root URL, http://host:port; Close stops it.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// Close stops a started Server and the calls it is answering.
func (s *Server) Close() error {
	if s.http == nil {
		return nil
	}
	return s.http.Close()
}

// Calls returns every call recorded so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsPerConversation counts the model calls each conversation made, failed
// ones included.
func (s *Server) CallsPerConversation() map[string]int {
	n := map[string]int{}
	for _, c := range s.Calls() {
		n[c.Conversation]++
	}
	return n
}

// plan is what one call is answered with.
type plan struct {
	seq   int
	out   Output
	delay time.Duration
	fail  *failure
}

type failure struct {
	status     int
	message    string
	retryAfter int
}

// decide picks the call's output (or its scripted error) and records the call;
// offered are the names of the tools the request offers (offeredNames).
func (s *Server) decide(api, model string, stream bool, c conversation, offered []string) plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := Call{Seq: len(s.calls) + 1, API: api, Stream: stream, Model: model,
		Conversation: c.first, User: c.last, Turn: s.script.match(c.last), Output: c.answered, Status: http.StatusOK}
	p := plan{seq: call.Seq}
	switch {
	case call.Turn < 0:
		p.fail = &failure{status: http.StatusBadRequest, message: fmt.Sprintf("dex provider: no script turn matches the user message %q", c.last)}
	case c.answered >= len(s.script.Turns[call.Turn].Outputs):
		p.fail = &failure{status: http.StatusBadRequest, message: fmt.Sprintf("dex provider: script turn %d has %d outputs and the conversation already holds %d answers", call.Turn, len(s.script.Turns[call.Turn].Outputs), c.answered)}
	default:
		t := s.script.Turns[call.Turn]
		p.out = offeredNames(t.Outputs[c.answered], offered)
		p.delay = time.Duration(t.DelayMS+p.out.DelayMS) * time.Millisecond
		p.fail = s.scriptedError(t, attemptKey{c.first, call.Turn, c.answered})
	}
	if p.fail != nil {
		call.Status, call.Error = p.fail.status, p.fail.message
	}
	s.calls = append(s.calls, call)
	if s.Log != nil {
		if b, err := json.Marshal(call); err == nil {
			_, _ = s.Log.Write(append(b, '\n'))
		}
	}
	return p
}

// offeredNames returns the output with each tool call under the name the
// request offers that tool by. A framework may offer a tool under a longer
// name than the script's: the Claude Code CLI offers an MCP server's tools as
// mcp__SERVER__NAME. So a call whose name is not offered, when exactly one
// offered name ends with "__" and that name, takes the offered name; any other
// call keeps its name.
func offeredNames(o Output, offered []string) Output {
	var calls []ToolCall
	for i, c := range o.ToolCalls {
		if name := offeredName(c.Name, offered); name != c.Name {
			if calls == nil {
				calls = slices.Clone(o.ToolCalls)
			}
			calls[i].Name = name
		}
	}
	if calls != nil {
		o.ToolCalls = calls
	}
	return o
}

func offeredName(name string, offered []string) string {
	if slices.Contains(offered, name) {
		return name
	}
	found := ""
	for _, o := range offered {
		if strings.HasSuffix(o, "__"+name) {
			if found != "" {
				return name // two candidates: neither is chosen
			}
			found = o
		}
	}
	if found == "" {
		return name
	}
	return found
}

// scriptedError counts the attempt and returns the error it must fail with, if
// any. Callers hold s.mu.
func (s *Server) scriptedError(t Turn, k attemptKey) *failure {
	n := s.attempts[k]
	s.attempts[k] = n + 1
	for _, e := range t.Errors {
		if e.Output != k.output {
			continue
		}
		times := e.Times
		if times == 0 {
			times = 1
		}
		if n < times {
			msg := e.Message
			if msg == "" {
				msg = fmt.Sprintf("dex provider: scripted error %d (attempt %d of %d)", e.Status, n+1, times)
			}
			return &failure{status: e.Status, message: msg, retryAfter: e.RetryAfter}
		}
		n -= times
	}
	return nil
}

// wait sleeps for the plan's delay unless the client goes away first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// decode reads a JSON request body of at most 32 MiB.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 32<<20))
	if err := dec.Decode(v); err != nil {
		return errors.New("dex provider: the request body is not valid JSON: " + err.Error())
	}
	return nil
}
