// Package wirerules holds the rules both ends of the Worker protocol apply
// and the texts both write: the cluster's state machine checks a model
// output, an agent name or an id with them before it logs anything, and the
// Worker library checks the same before it sends, so a bad value is refused
// at once with the same reason. It imports nothing of the cluster: the
// Worker library depends on the wire only.
package wirerules

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// NotRunPrefix begins the result of a tool call that never ran: no attempt
// of it was ever claimed by a Worker, so the tool had no side effect and it
// is safe to call it again.
const NotRunPrefix = "the tool did not run, so it is safe to call again"

// MaxIDLength bounds every id and name the cluster stores, in bytes.
const MaxIDLength = 200

// IDChars describes the characters a session id may hold (and so every
// Step id, which is the session id with a suffix, e.g. "ses-3f2a-s4").
// Ids end up in logs, metric labels, file names of tools and terminals: no
// control or invisible characters, no "/" and no "..".
const IDChars = `letters, digits and "-_.:@"`

// NewSessionID returns a new random session id ("ses-" and 16 hex digits),
// the form both a client that picks its session's id and the cluster, for a
// CreateSession that names none, make.
func NewSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ses-" + hex.EncodeToString(b[:])
}

// CheckID refuses an id that is empty, longer than MaxIDLength, "." or holds
// a character outside IDChars or "..". what names the id in the error
// ("session id").
func CheckID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s is required", what)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%s is longer than %d bytes", what, MaxIDLength)
	}
	for _, r := range id {
		if !idRune(r) {
			return fmt.Errorf("%s %q holds %q: use only %s", what, id, r, IDChars)
		}
	}
	if id == "." || strings.Contains(id, "..") {
		return fmt.Errorf("%s %q must not be \".\" or hold \"..\"", what, id)
	}
	return nil
}

func idRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("-_.:@", r)
}

// CheckAgent refuses an agent name (NAME or NAME@VERSION) that is not an id
// (CheckID). Empty is the default agent.
func CheckAgent(agent string) error {
	if agent == "" {
		return nil
	}
	return CheckID("agent", agent)
}

// NamedCall is a model output's tool call, as the log or the Worker
// protocol carries it.
type NamedCall interface {
	GetTool() string
	GetCallId() string
}

// CheckModelOutput is the rule every model output meets before it is
// logged: each tool call names a tool and a call id, unique within the
// output (results, idempotency keys and Steps are keyed by it).
func CheckModelOutput[C NamedCall](calls []C) error {
	seen := make(map[string]string, len(calls))
	for i, tc := range calls {
		if tc.GetTool() == "" {
			return fmt.Errorf("tool call %d of the model output (call id %q) names no tool", i+1, tc.GetCallId())
		}
		if tc.GetCallId() == "" {
			return fmt.Errorf("tool call %d of the model output (tool %q) has no call id: every tool call needs one, unique within the output", i+1, tc.GetTool())
		}
		if first, dup := seen[tc.GetCallId()]; dup {
			return fmt.Errorf("call id %q appears twice in one model output (tools %q and %q): call ids must be unique within the output", tc.GetCallId(), first, tc.GetTool())
		}
		seen[tc.GetCallId()] = tc.GetTool()
	}
	return nil
}
