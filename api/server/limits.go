package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits keep every accepted message deliverable and showable: a message is
// at most a quarter of --max-payload, a model input at most half of it (a
// turn whose input would be larger fails with context_length), and a
// session compacts its history once it passes an eighth, unless it asks for
// another threshold up to the model-input limit.
type Limits struct {
	MaxMessage                 int
	MaxModelInput              uint64
	DefaultCompactionThreshold uint64
}

// LimitsFor derives the limits from the largest request a node accepts.
func LimitsFor(maxPayload int) Limits {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	return Limits{
		MaxMessage:                 maxPayload / 4,
		MaxModelInput:              uint64(maxPayload / 2),
		DefaultCompactionThreshold: uint64(maxPayload / 8),
	}
}

func (l Limits) checkMessage(text string) error {
	if len(text) > l.MaxMessage {
		return status.Errorf(codes.ResourceExhausted, "message of %d bytes is over this cluster's limit of %d bytes (a quarter of --max-payload)", len(text), l.MaxMessage)
	}
	return nil
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
