package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The retention of closed sessions. A session closed with a retention is
// due for deletion at delete_at_ms (closed_at_ms plus its retention); the
// leader finds the due ones through the store's index of closed sessions by
// that time and proposes ExpireClosedSessions, each naming a bounded batch.
// Deleting is DeleteSession's tombstone; the collector then purges the
// rows. The leader keeps nothing of its own: a new one finds the same work
// in the state.

// checkExpireClosedSessions refuses an ExpireClosedSessions whose fields
// are out of range, before its epoch is checked.
func checkExpireClosedSessions(c *fsmpb.ExpireClosedSessions) *Rejection {
	if len(c.SessionIds) == 0 || len(c.SessionIds) > MaxExpireSessions {
		return reject(CodeInvalid, "an expiry of closed sessions names 1..%d sessions, got %d", MaxExpireSessions, len(c.SessionIds))
	}
	for _, id := range c.SessionIds {
		if r := validID("session id", id); r != nil {
			return r
		}
	}
	return nil
}

// expireClosedSessions deletes the named sessions that are closed and due
// at the command's time; it skips the others (unknown, not closed, kept for
// ever, not due yet), since the leader read them from a state that may have
// moved on.
func (a *applier) expireClosedSessions(c *fsmpb.ExpireClosedSessions) *Result {
	for _, id := range c.SessionIds {
		s, r := a.session(id)
		if r != nil || !closedDue(s, a.now) {
			continue
		}
		a.tombstone(s)
	}
	return &Result{}
}

// closedDue reports whether a session is closed and its retention has
// passed at nowMs.
func closedDue(s *fsmpb.Session, nowMs int64) bool {
	return isClosed(s) && s.DeleteAtMs != 0 && s.DeleteAtMs <= nowMs
}

// ClosedDue returns up to limit closed sessions whose retention has passed
// at nowMs, the earliest due first: a read of the index of closed sessions
// by deletion time, which stops at the first one not due.
func (s *State) ClosedDue(nowMs int64, limit int) []string {
	if limit <= 0 {
		return nil
	}
	var out []string
	for sess := range s.tx.ClosedByDeleteAt() {
		if sess.DeleteAtMs > nowMs {
			break
		}
		out = append(out, sess.Id)
		if len(out) >= limit {
			break
		}
	}
	return out
}
