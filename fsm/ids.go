package fsm

import (
	"unicode"
	"unicode/utf8"

	"github.com/dexhq/dex/api/wirerules"
)

// IDChars describes the characters an id may hold (wirerules.IDChars).
const IDChars = wirerules.IDChars

// CheckID refuses an id that is empty, too long, "." or holds a character
// outside IDChars or "..". what names the id in the error ("session id").
// The rule is wirerules.CheckID, which the Worker library applies too.
func CheckID(what, id string) *Rejection { return invalid(wirerules.CheckID(what, id)) }

// invalid is a rule's refusal as an InvalidArgument rejection (nil: none).
func invalid(err error) *Rejection {
	if err == nil {
		return nil
	}
	return &Rejection{Code: CodeInvalid, Reason: err.Error()}
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
