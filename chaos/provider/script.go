// Package provider serves a scripted model behind the HTTP APIs of the model
// providers (OpenAI's Chat Completions and Responses, Anthropic's Messages), so
// that a Worker's own SDK and framework run unchanged against Dex's chaos
// harness: they only need their base URL pointed at it.
package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Script says what the model answers. Each request is matched to the first Turn
// whose pattern matches the conversation's last user message; the Turn's
// Outputs are then given in order, one per model call, chosen by how many
// assistant turns the conversation already holds after that user message. A
// framework that resends the whole conversation thus gets the row's next
// output without the server keeping any state.
type Script struct {
	Turns []Turn `json:"turns"`
}

// Turn is one row of the script.
type Turn struct {
	// Contains matches a last user message holding this text; Prefix one
	// starting with it. Exactly one of them is set.
	Contains string `json:"contains,omitempty"`
	Prefix   string `json:"prefix,omitempty"`
	// Outputs are the model's answers, in order.
	Outputs []Output `json:"outputs"`
	// DelayMS holds every answer of this row back (each Output may add its own).
	DelayMS int `json:"delay_ms,omitempty"`
	// Errors make some calls fail before they get their output, so a row can
	// test a framework's retries.
	Errors []ScriptedError `json:"errors,omitempty"`
}

// Output is one model answer: tool calls, text, or text then tool calls.
type Output struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	DelayMS   int        `json:"delay_ms,omitempty"`
}

// ToolCall asks for one tool with JSON arguments.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ScriptedError fails the first Times calls (1 when unset) that would get
// output number Output of the row, with the provider's error body for Status
// (429, 500, 400, 529 …).
type ScriptedError struct {
	Output  int    `json:"output"`
	Status  int    `json:"status"`
	Times   int    `json:"times,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header when set.
	RetryAfter int `json:"retry_after,omitempty"`
}

// LoadScript reads a JSON script file.
func LoadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScript(b)
}

// ParseScript decodes and checks a JSON script.
func ParseScript(b []byte) (*Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("script: %w", err)
	}
	return &s, s.Validate()
}

// Validate reports the first mistake in the script.
func (s *Script) Validate() error {
	if len(s.Turns) == 0 {
		return errors.New("script: no turns")
	}
	for i, t := range s.Turns {
		if (t.Contains == "") == (t.Prefix == "") {
			return fmt.Errorf("script: turn %d: set exactly one of contains and prefix", i)
		}
		if len(t.Outputs) == 0 {
			return fmt.Errorf("script: turn %d: no outputs", i)
		}
		for j, o := range t.Outputs {
			if o.Text == "" && len(o.ToolCalls) == 0 {
				return fmt.Errorf("script: turn %d output %d: neither text nor tool calls", i, j)
			}
			for _, c := range o.ToolCalls {
				if c.Name == "" {
					return fmt.Errorf("script: turn %d output %d: a tool call without a name", i, j)
				}
				if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
					return fmt.Errorf("script: turn %d output %d: arguments of %s are not JSON", i, j, c.Name)
				}
			}
		}
		for _, e := range t.Errors {
			if e.Status < 400 || e.Status > 599 {
				return fmt.Errorf("script: turn %d: error status %d is not an HTTP error", i, e.Status)
			}
			if e.Output < 0 || e.Output >= len(t.Outputs) {
				return fmt.Errorf("script: turn %d: error for output %d, which the row does not have", i, e.Output)
			}
		}
	}
	return nil
}

// match returns the index of the first Turn matching the user message, or -1.
func (s *Script) match(user string) int {
	for i, t := range s.Turns {
		if t.Contains != "" && strings.Contains(user, t.Contains) {
			return i
		}
		if t.Prefix != "" && strings.HasPrefix(user, t.Prefix) {
			return i
		}
	}
	return -1
}

// args returns the call's arguments as compact JSON text ("{}" when unset).
func (c ToolCall) args() string {
	if len(c.Arguments) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, c.Arguments); err != nil {
		return string(c.Arguments)
	}
	return b.String()
}
