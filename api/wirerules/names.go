package wirerules

import dexv1 "github.com/dexhq/dex/api/dexv1"

// SessionStatusName is the documented name of a session status
// (docs/sessions.md): "idle", "running", … What the CLI, the console and the
// cluster's own messages print.
func SessionStatusName(st dexv1.SessionStatus) string {
	switch st {
	case dexv1.SessionStatus_SESSION_STATUS_IDLE:
		return "idle"
	case dexv1.SessionStatus_SESSION_STATUS_RUNNING:
		return "running"
	case dexv1.SessionStatus_SESSION_STATUS_WAITING:
		return "waiting"
	case dexv1.SessionStatus_SESSION_STATUS_ERRORED:
		return "errored"
	case dexv1.SessionStatus_SESSION_STATUS_PAUSED:
		return "paused"
	case dexv1.SessionStatus_SESSION_STATUS_DELETED:
		return "deleted"
	case dexv1.SessionStatus_SESSION_STATUS_CLOSED:
		return "closed"
	}
	return "unknown"
}

// OutcomeName is the documented name of a Step's outcome: "succeeded",
// "failed", "outcome_unknown", or "" while it has none.
func OutcomeName(o dexv1.Outcome) string {
	switch o {
	case dexv1.Outcome_OUTCOME_SUCCEEDED:
		return "succeeded"
	case dexv1.Outcome_OUTCOME_FAILED:
		return "failed"
	case dexv1.Outcome_OUTCOME_UNKNOWN:
		return "outcome_unknown"
	}
	return ""
}
