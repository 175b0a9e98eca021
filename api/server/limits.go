package server

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits keep every accepted payload deliverable, showable and restorable
// (docs/limits.md says the same for users): a request is at most
// --max-payload (gRPC refuses a larger one, which bounds a model output, a
// tool result and a summary); a message, a note, an answer to a question and
// an approval's reason at most a quarter of it; a model input at most half
// (a turn whose input would be larger fails with context_length); a
// failure's error text is cut to MaxErrorText. A session compacts its
// history once it passes an eighth, unless it asks for another threshold up
// to the model-input limit.
type Limits struct {
	MaxPayload                 int
	MaxMessage                 int
	MaxModelInput              uint64
	DefaultCompactionThreshold uint64
}

// MaxErrorText is the longest error text a failed attempt keeps: a
// provider's error can echo the whole request, and the text is copied into
// the attempt, the Step, the session's last error and its events.
const MaxErrorText = 16 << 10

// LimitsFor derives the limits from the largest request a node accepts.
func LimitsFor(maxPayload int) Limits {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	return Limits{
		MaxPayload:                 maxPayload,
		MaxMessage:                 maxPayload / 4,
		MaxModelInput:              uint64(maxPayload / 2),
		DefaultCompactionThreshold: uint64(maxPayload / 8),
	}
}

func (l Limits) checkMessage(text string) error {
	return l.checkText("message", text)
}

// checkText refuses a user's text (a message, a note, an answer, a reason)
// over the message limit.
func (l Limits) checkText(what, text string) error {
	if len(text) > l.MaxMessage {
		return status.Errorf(codes.ResourceExhausted, "%s of %d bytes is over this cluster's limit of %d bytes (a quarter of --max-payload)", what, len(text), l.MaxMessage)
	}
	return nil
}

// cutErrorText keeps the head of an error text over MaxErrorText and says
// how much was cut.
func cutErrorText(text string) string {
	if len(text) <= MaxErrorText {
		return text
	}
	note := fmt.Sprintf("… (%d more bytes cut: error texts are kept up to %d bytes)", len(text)-MaxErrorText, MaxErrorText)
	cut := MaxErrorText - len(note)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut-- // a proto string stays valid UTF-8
	}
	return text[:cut] + note
}

// compactionThreshold is the threshold a new session gets: the default when
// it asks for none.
func (l Limits) compactionThreshold(asked uint64) (uint64, error) {
	if asked == 0 {
		return l.DefaultCompactionThreshold, nil
	}
	if asked > l.MaxModelInput {
		return 0, status.Errorf(codes.InvalidArgument, "compaction threshold %d is over this cluster's model input limit of %d characters (half of --max-payload)", asked, l.MaxModelInput)
	}
	return asked, nil
}
