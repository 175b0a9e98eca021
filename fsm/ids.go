package fsm

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// IDChars describes the characters a session id may hold (and so every
// Step id, which is the session id with a suffix, e.g. "ses-3f2a-s4").
// Ids end up in logs, metric labels, file names of tools and terminals: no
// control or invisible characters, no "/" and no "..".
const IDChars = `letters, digits and "-_.:@"`

// CheckID refuses an id that is empty, too long, "." or holds a character
// outside IDChars or "..". what names the id in the error ("session id").
func CheckID(what, id string) *Rejection {
	if r := validID(what, id); r != nil {
		return r
	}
	for _, r := range id {
		if !idRune(r) {
			return reject(CodeInvalid, "%s %q holds %q: use only %s", what, id, r, IDChars)
		}
	}
	if id == "." || strings.Contains(id, "..") {
		return reject(CodeInvalid, "%s %q must not be \".\" or hold \"..\"", what, id)
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

// CheckKey refuses a message id or idempotency key that is empty, too long,
// not UTF-8 or holds a character that does not print (control characters,
// bidi controls, zero-width characters). Keys are opaque: "/" is allowed
// (the API's own first-message key is "SESSION/first").
func CheckKey(what, key string) *Rejection {
	if r := validID(what, key); r != nil {
		return r
	}
	if !utf8.ValidString(key) {
		return reject(CodeInvalid, "%s %q is not UTF-8", what, key)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) {
			return reject(CodeInvalid, "%s %q holds the unprintable %q", what, key, r)
		}
	}
	return nil
}
