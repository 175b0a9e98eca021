package fsm

import (
	"time"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Retry and backoff policy. docs/attempts.md and docs/sessions.md give these numbers.
const (
	// ModelMaxAttempts bounds RunModel and CompactContext attempts of one Step…
	ModelMaxAttempts = 3
	// …within this window from the first attempt.
	ModelAttemptWindow = 30 * time.Minute
	// DefaultToolAttempts is used for reads and idempotent writes that name none.
	DefaultToolAttempts = 3
	// RejectedTurnLimit pauses a session whose turn was rejected this many times.
	RejectedTurnLimit = 3

	retryBackoffBase  = time.Second
	retryBackoffCap   = 30 * time.Second
	resumeBackoffBase = 5 * time.Second
	resumeBackoffCap  = 5 * time.Minute
	defaultPollEvery  = time.Second
)

// NotRunPrefix begins the error of a call that never ran.
const NotRunPrefix = wirerules.NotRunPrefix

// Built-in tools handled by the cluster itself.
const (
	BuiltinAskUser = "ask_user"
	BuiltinSleep   = "sleep"
	// BuiltinResumeAgent lets a parent's model resume its paused or errored
	// child: {"agent": ID, "choice": "retry"|"drop"}.
	BuiltinResumeAgent = "resume_agent"
)

// IsBuiltin reports whether a tool name is one the cluster handles itself.
func IsBuiltin(name string) bool {
	return name == BuiltinAskUser || name == BuiltinSleep || name == BuiltinResumeAgent
}

// retryBackoff is the delay before attempt used+1 of a Step.
func retryBackoff(used int) int64 {
	return capped(retryBackoffBase, retryBackoffCap, used-1)
}

// resumeBackoff is the delay before the n-th automatic resume of an errored
// session in one error-resume episode (n from 0).
func resumeBackoff(n uint32) int64 {
	return capped(resumeBackoffBase, resumeBackoffCap, int(n))
}

func capped(base, limit time.Duration, doublings int) int64 {
	d := base
	for i := 0; i < doublings && d < limit; i++ {
		d *= 2
	}
	if d > limit {
		d = limit
	}
	return d.Milliseconds()
}

// Retryable reports whether a model failure of this type leaves the turn to
// be resumed: the session keeps its input and the cluster retries it on its
// own. A failure with no type (a crash, an expired attempt) is retryable; an
// unknown one (a handler's plain error) is not: it could be a rejection.
func Retryable(t fsmpb.ErrorType) bool {
	switch t {
	case fsmpb.ErrorType_ERROR_TYPE_INVALID_REQUEST, fsmpb.ErrorType_ERROR_TYPE_CONTEXT_LENGTH, fsmpb.ErrorType_ERROR_TYPE_UNKNOWN:
		return false
	}
	return true
}

// RetriedInStep reports whether a failed model attempt of this type is
// followed by another attempt of the same Step while attempts are left. An
// unknown failure is, as it may be passing; only the provider's own
// rejections are not.
func RetriedInStep(t fsmpb.ErrorType) bool {
	return t == fsmpb.ErrorType_ERROR_TYPE_UNKNOWN || Retryable(t)
}

func toolAttempts(p *fsmpb.ToolSpec) uint32 {
	if p.GetAccess() == fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT {
		return 1
	}
	if p.GetMaxAttempts() > 0 {
		return p.GetMaxAttempts()
	}
	return DefaultToolAttempts
}

func pollEvery(p *fsmpb.ToolSpec) int64 {
	if p.GetPollIntervalMs() > 0 {
		return int64(p.GetPollIntervalMs())
	}
	return defaultPollEvery.Milliseconds()
}

// IdempotencyKey is handed to every attempt of a write: the same key in every
// attempt, derived from the session and the call id.
func IdempotencyKey(sessionID, callID string) string {
	return "dex:" + sessionID + ":" + callID
}
