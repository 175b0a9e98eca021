package provider

import (
	"encoding/json"
	"strings"
)

// conversation is what the server reads from any provider's request: the
// first user message (which names the conversation in the record), the last
// one (which picks the script's row) and how many assistant turns follow it
// (which picks the row's output).
type conversation struct {
	first, last string
	answered    int
}

// builder collects a conversation message by message.
type builder struct {
	c        conversation
	seenUser bool
	inAnswer bool // the previous item was part of an assistant turn
}

// user records a user message carrying text; tool results are not user
// messages.
func (b *builder) user(text string) {
	if !b.seenUser {
		b.c.first = text
		b.seenUser = true
	}
	b.c.last = text
	b.c.answered = 0
	b.inAnswer = false
}

// assistant records one item of an assistant turn; consecutive items (the
// Responses API lists each function call on its own) are one turn.
func (b *builder) assistant() {
	if !b.inAnswer {
		b.c.answered++
	}
	b.inAnswer = true
}

// other records an item that is neither (a tool result, a system message): it
// ends an assistant turn.
func (b *builder) other() { b.inAnswer = false }

// textOf reads message content that is either a string or a list of parts
// with a "text" field; it reports whether any text part was there.
func textOf(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var texts []string
	found := false
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text", "":
			texts = append(texts, p.Text)
			found = true
		}
	}
	return strings.Join(texts, "\n"), found
}
