package fsm

import (
	"fmt"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Code classifies why a command was rejected; the API maps it to a gRPC status.
type Code int

const (
	// CodeInvalid: the command is malformed (InvalidArgument).
	CodeInvalid Code = iota + 1
	// CodeNotFound: it names a session, Step or attempt that does not exist.
	CodeNotFound
	// CodeFailedPrecondition: the state does not allow it now (stale epoch,
	// replaced attempt, Step not waiting…).
	CodeFailedPrecondition
	// CodeAlreadyExists: it would create something that exists.
	CodeAlreadyExists
	// CodeResourceExhausted: it would go over a bound of the state (the
	// count or size of schedules).
	CodeResourceExhausted
)

func (c Code) String() string {
	switch c {
	case CodeInvalid:
		return "invalid"
	case CodeNotFound:
		return "not_found"
	case CodeFailedPrecondition:
		return "failed_precondition"
	case CodeAlreadyExists:
		return "already_exists"
	case CodeResourceExhausted:
		return "resource_exhausted"
	}
	return fmt.Sprintf("code(%d)", int(c))
}

// Rejection says why a command changed nothing.
type Rejection struct {
	Code   Code
	Reason string
}

func (r *Rejection) Error() string { return r.Code.String() + ": " + r.Reason }

func reject(code Code, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// Result is what Apply returns for one log entry.
type Result struct {
	Index uint64
	// Err is set when the command was rejected; the state is unchanged.
	Err *Rejection
	// Epoch is the dispatch epoch after the command.
	Epoch     uint64
	SessionID string
	StepID    string
	// Attempt is the attempt a StartAttempt created or a Worker call named.
	Attempt *fsmpb.Attempt
	// Replayed: a Worker call repeated one already committed; the first
	// answer is returned and nothing changed.
	Replayed bool
	// Ignored: the entry was of an unknown type marked ignorable.
	Ignored bool
	// Batch holds the results of a Batch entry's commands, in order (its
	// own Err is nil: each command is accepted or rejected alone).
	Batch []*Result
	// A CancelTurn's count of the Steps it ended, and of those whose running
	// attempt it cancelled.
	StepsCancelled, AttemptsCancelled uint32
}
