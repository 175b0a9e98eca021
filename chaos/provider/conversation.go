package provider

import (
	"encoding/json"
	"regexp"
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
// messages. A user message that is a transcript of a whole conversation
// (readTranscript) stands for that conversation.
func (b *builder) user(text string) {
	first, last, answered := text, text, 0
	if t, ok := readTranscript(text); ok {
		first, last, answered = t.first, t.last, t.answered
	}
	if !b.seenUser {
		b.c.first = first
		b.seenUser = true
	}
	b.c.last = last
	b.c.answered = answered
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

// A transcript is a conversation handed to the model as one user message, as
// Dex's claude-agent-sdk adapter does (the Claude Code CLI takes only user
// input): one entry a line, a line of no entry's shape continuing the entry
// before it.
//
//	User: TEXT
//	Assistant: TEXT
//	Assistant called NAME (ID) with ARGUMENTS
//	Result of NAME (ID): CONTENT
//	Result of NAME (ID) [error]: CONTENT
var (
	transcriptCall   = regexp.MustCompile(`^Assistant called (\S+) \(([^()]*)\) with `)
	transcriptResult = regexp.MustCompile(`^Result of (\S+) \(([^()]*)\)( \[error\])?: `)
)

// transcript is what a transcript says of its conversation: its first user
// message, its last one, and the assistant turns after the last.
type transcript struct {
	first, last string
	answered    int
}

// readTranscript reads a user message as a transcript when it is one: it
// starts with "User: ", once the Claude Code CLI's <system-reminder> blocks
// before and after it are left out (the CLI puts its environment, the date
// and such in the user message's first text blocks). A "Result of" line
// counts only when it answers an "Assistant called" line before it (the same
// name and id); other lines of no entry's shape continue the entry before
// them, so a user message of several lines stays whole. Consecutive
// assistant lines are one turn; a result or a user line ends it.
func readTranscript(text string) (transcript, bool) {
	text = withoutReminders(text)
	if !strings.HasPrefix(text, "User: ") {
		return transcript{}, false
	}
	var t transcript
	var user []string // the lines of the current user entry, nil when in another entry
	seenUser, inAnswer := false, false
	called := map[string]bool{}
	endUser := func() {
		if user != nil {
			t.last = strings.Join(user, "\n")
			if !seenUser {
				t.first, seenUser = t.last, true
			}
			user = nil
		}
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "User: "):
			endUser()
			user = []string{strings.TrimPrefix(line, "User: ")}
			t.answered, inAnswer = 0, false
		case strings.HasPrefix(line, "Assistant: ") || transcriptCall.MatchString(line):
			endUser()
			if m := transcriptCall.FindStringSubmatch(line); m != nil {
				called[m[1]+" "+m[2]] = true
			}
			if !inAnswer {
				t.answered++
			}
			inAnswer = true
		case transcriptResult.MatchString(line) && called[resultKey(line)]:
			endUser()
			inAnswer = false
		default:
			if user != nil {
				user = append(user, line)
			}
		}
	}
	endUser()
	return t, true
}

// withoutReminders leaves out the <system-reminder> blocks at the start and
// at the end of a text, and the blank space around them.
func withoutReminders(text string) string {
	const open, end = "<system-reminder>", "</system-reminder>"
	for {
		t := strings.TrimSpace(text)
		switch {
		case strings.HasPrefix(t, open) && strings.Contains(t, end):
			t = t[strings.Index(t, end)+len(end):]
		case strings.HasSuffix(t, end) && strings.Contains(t, open):
			t = t[:strings.LastIndex(t, open)]
		default:
			return t
		}
		text = t
	}
}

func resultKey(line string) string {
	m := transcriptResult.FindStringSubmatch(line)
	return m[1] + " " + m[2]
}
