package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Closing. A closed session takes no more messages and can still be read;
// the leader deletes it once its retention has passed (retention.go).
//
// CloseSession never waits and never fails on a busy session: a session at
// rest is closed at once; one in a turn is closing, refuses messages from
// then on, starts no further turn, and is closed when its turn ends however
// it ends (answered, failed, paused, cancelled). So a close can be asked of
// any session at any time (a bulk close included) and a turn in progress is
// never cut short: its tool calls keep their exactly-once rules.

// MaxRetentionMs bounds a session's retention (100 years), so a deletion
// time never overflows.
const MaxRetentionMs = 100 * 365 * 24 * 3600 * 1000

// checkRetention refuses a retention that is negative or absurdly long.
func checkRetention(what string, ms int64) *Rejection {
	if ms < 0 {
		return reject(CodeInvalid, "%s must not be negative (0: kept for ever), got %d ms", what, ms)
	}
	if ms > MaxRetentionMs {
		return reject(CodeInvalid, "%s is at most %d ms (100 years), got %d ms", what, int64(MaxRetentionMs), ms)
	}
	return nil
}

// closing reports whether a session was asked to close: it takes no more
// messages and starts no further turn.
func closing(s *fsmpb.Session) bool { return s.CloseRequestedAtMs != 0 }

// isClosed reports whether a session is closed.
func isClosed(s *fsmpb.Session) bool {
	return s.Status == fsmpb.SessionStatus_SESSION_STATUS_CLOSED
}

// refuseClosing is the answer to input a closing or closed session no
// longer takes (nil when it takes it).
func refuseClosing(s *fsmpb.Session, what string) *Rejection {
	switch {
	case isClosed(s):
		return reject(CodeFailedPrecondition, "session %s is closed: it takes no more %s", s.Id, what)
	case closing(s):
		return reject(CodeFailedPrecondition, "session %s is closing (its turn ends, then it is closed): it takes no more %s", s.Id, what)
	}
	return nil
}

func (a *applier) closeSession(c *fsmpb.CloseSession) *Result {
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	if r := checkRetention("retention_ms", c.RetentionMs); r != nil {
		return rejected(r)
	}
	if closing(s) {
		return &Result{SessionID: s.Id} // asked before: nothing changes
	}
	if s.RetentionMs == nil {
		s.RetentionMs = proto.Int64(c.RetentionMs)
	}
	s.CloseRequestedAtMs = a.now
	if inTurn(s.Status) {
		a.emit(s.Id, "close_requested", "", "the session is closed when its turn ends")
	}
	a.putSession(s)
	return &Result{SessionID: s.Id}
}

// settleClose closes a closing session that is no longer in a turn: every
// write of a session goes through it (putSession), so however a turn ends
// the session is closed in the same command.
func (a *applier) settleClose(s *fsmpb.Session) {
	if !closing(s) || inTurn(s.Status) || isClosed(s) || deleted(s) {
		return
	}
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_CLOSED
	s.ResumeAtMs = 0
	s.ClosedAtMs = a.now
	s.DeleteAtMs = 0
	if ms := s.GetRetentionMs(); ms > 0 {
		s.DeleteAtMs = a.now + ms
	}
	detail := "kept for ever"
	if s.DeleteAtMs != 0 {
		detail = fmt.Sprintf("kept until %d", s.DeleteAtMs)
	}
	a.emit(s.Id, "session_closed", "", detail)
}
