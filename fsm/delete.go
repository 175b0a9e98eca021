package fsm

import (
	"fmt"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Sessions have a lifecycle, collected as Nomad's core scheduler collects
// jobs: DeleteSession (or ExpireSessions, the leader's retention) only turns
// the header into a tombstone, which every reader and command treats as not
// found; the leader's collector then proposes PurgeSession commands that
// each remove a bounded number of the session's rows, the header last. So
// no command touches more than a bounded number of rows, however long the
// session was.

const (
	// MaxPurgeRows bounds the rows one PurgeSession removes.
	MaxPurgeRows = 1000
	// MaxExpireSessions bounds the sessions one ExpireSessions names.
	MaxExpireSessions = 100
)

// inTurn reports whether a session's status is one of a turn under way.
func inTurn(st fsmpb.SessionStatus) bool { return store.InTurn(st) }

func deleted(s *fsmpb.Session) bool {
	return s.Status == fsmpb.SessionStatus_SESSION_STATUS_DELETED
}

// hidden reports whether reads and commands treat a session row as absent:
// a tombstone, or a session still being imported.
func hidden(s *fsmpb.Session) bool { return deleted(s) || importing(s) }

func (a *applier) deleteSession(c *fsmpb.DeleteSession) *Result {
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	switch s.Status {
	case fsmpb.SessionStatus_SESSION_STATUS_IDLE, fsmpb.SessionStatus_SESSION_STATUS_PAUSED, fsmpb.SessionStatus_SESSION_STATUS_ERRORED,
		fsmpb.SessionStatus_SESSION_STATUS_CLOSED:
	default:
		return rejected(reject(CodeFailedPrecondition, "session %s is %s: only an idle, paused, errored or closed session can be deleted; wait for its turn to end", s.Id, StatusName(s.Status)))
	}
	a.tombstone(s)
	return &Result{SessionID: s.Id}
}

// tombstone marks a session deleted and tells its parent, once: the
// tombstone is not found by the next DeleteSession.
func (a *applier) tombstone(s *fsmpb.Session) {
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_DELETED
	s.ResumeAtMs = 0
	a.emit(s.Id, "session_deleted", "", "")
	a.putSession(s)
	a.tellParent(s, fmt.Sprintf("<child-deleted agent=%q>the agent was deleted</child-deleted>", s.Id))
}

// checkExpireSessions refuses an ExpireSessions whose fields are out of range, before its epoch
// is checked.
func checkExpireSessions(c *fsmpb.ExpireSessions) *Rejection {
	if len(c.SessionIds) == 0 || len(c.SessionIds) > MaxExpireSessions {
		return reject(CodeInvalid, "an expiry names 1..%d sessions, got %d", MaxExpireSessions, len(c.SessionIds))
	}
	if c.IdleBeforeMs <= 0 {
		return reject(CodeInvalid, "idle_before_ms must be positive, got %d", c.IdleBeforeMs)
	}
	return nil
}

// expireSessions deletes the named sessions that are still idle, with an
// empty inbox, since before idle_before_ms; it skips the others, since the
// leader read them from a state that may have moved on.
func (a *applier) expireSessions(c *fsmpb.ExpireSessions) *Result {
	for _, id := range c.SessionIds {
		s, r := a.session(id)
		if r != nil || s.Status != fsmpb.SessionStatus_SESSION_STATUS_IDLE || s.InboxCount > 0 || s.UpdatedAtMs >= c.IdleBeforeMs {
			continue
		}
		a.tombstone(s)
	}
	return &Result{}
}

// checkPurgeSession refuses a PurgeSession whose fields are out of range, before its epoch
// is checked.
func checkPurgeSession(c *fsmpb.PurgeSession) *Rejection {
	if c.MaxRows == 0 || c.MaxRows > MaxPurgeRows {
		return reject(CodeInvalid, "max_rows must be 1..%d, got %d", MaxPurgeRows, c.MaxRows)
	}
	return validID("session id", c.SessionId)
}

// purgeSession removes up to max_rows rows of a deleted session, table by
// table: Steps, folded turns, history, inbox, accepted message ids, events (oldest first,
// through the event log so it stays true), then the event log and the header.
func (a *applier) purgeSession(c *fsmpb.PurgeSession) *Result {
	s := a.sessionRow(c.SessionId)
	if s == nil {
		return rejected(reject(CodeNotFound, "session %q not found", c.SessionId))
	}
	if !deleted(s) {
		return rejected(reject(CodeFailedPrecondition, "session %s is %s, not deleted: only a deleted session is purged", s.Id, StatusName(s.Status)))
	}
	budget := int(c.MaxRows)
	for _, t := range sessionTables {
		rows := firstRows(a.tx, t, s.Id, budget)
		for _, raw := range rows {
			a.delete(t.table, raw)
			if st, ok := raw.(*fsmpb.Step); ok {
				a.touched.step(st.Id) // the broker drops it
			}
		}
		if budget -= len(rows); budget == 0 {
			return &Result{SessionID: s.Id}
		}
	}
	log := a.eventLog(s.Id)
	for log.FirstSeq != 0 && budget > 0 {
		a.dropFirstEvent(log)
		budget--
	}
	hasLog := a.tx.EventLog(s.Id)
	need := 1 // the header
	if hasLog != nil {
		need = 2
	}
	if log.FirstSeq != 0 || budget < need {
		if hasLog != nil {
			a.insert(store.TableEventLogs, log)
		}
		return &Result{SessionID: s.Id}
	}
	if hasLog != nil {
		a.delete(store.TableEventLogs, log)
	}
	a.delete(store.TableSessions, s)
	a.touched.session(s.Id)
	return &Result{SessionID: s.Id}
}

// sessionTable names a table of rows keyed by session first.
type sessionTable struct {
	table string
}

// sessionTables are what a purge removes of a session, in this order.
var sessionTables = []sessionTable{{store.TableSteps}, {store.TableFoldedTurns}, {store.TableHistory}, {store.TableInbox}, {store.TableAccepted}}

// firstRows returns up to limit of the session's rows of t, in index order.
func firstRows(tx *store.Txn, t sessionTable, sessionID string, limit int) []any {
	if limit <= 0 {
		return nil
	}
	var out []any
	for raw := range tx.SessionRowsOf(t.table, sessionID) {
		out = append(out, raw)
		if len(out) >= limit {
			break
		}
	}
	return out
}

// sessionRow returns a copy of a session's header, tombstone or not; nil
// when there is none.
func (a *applier) sessionRow(id string) *fsmpb.Session {
	if s := a.storedSession(id); s != nil {
		return s.CloneVT()
	}
	return nil
}

// storedSession returns the session's header row itself, to read only; nil
// when there is none.
func (a *applier) storedSession(id string) *fsmpb.Session {
	return a.tx.Session(id)
}

// DeletedSessions returns up to limit deleted sessions whose rows the
// leader still owes a purge, the longest deleted first.
func (s *State) DeletedSessions(limit int) []string {
	var out []string
	eachSessionIn(s.tx, fsmpb.SessionStatus_SESSION_STATUS_DELETED, func(sess *fsmpb.Session) bool {
		out = append(out, sess.Id)
		return len(out) < limit
	})
	return out
}

// eachSessionIn calls fn with the sessions in a status, least recently
// updated first, until fn returns false: a seek on (status, updated_at_ms),
// the only status index of sessions.
func eachSessionIn(tx *store.Txn, status fsmpb.SessionStatus, fn func(*fsmpb.Session) bool) {
	for s := range tx.SessionsAtRest(status) {
		if !fn(s) {
			return
		}
	}
}

// IdleBefore returns up to limit idle sessions with an empty inbox last
// updated before ms, the longest idle first: a seek on (status, updated_at_ms).
func (s *State) IdleBefore(ms int64, limit int) []string {
	var out []string
	if limit <= 0 {
		return nil
	}
	for sess := range s.tx.SessionsAtRest(fsmpb.SessionStatus_SESSION_STATUS_IDLE) {
		if sess.UpdatedAtMs >= ms {
			break
		}
		if sess.InboxCount == 0 {
			out = append(out, sess.Id)
			if len(out) >= limit {
				break
			}
		}
	}
	return out
}

// IsDeleted reports whether a session is a tombstone still owed a purge.
func (s *State) IsDeleted(id string) bool {
	sess := s.tx.Session(id)
	return sess != nil && deleted(sess)
}
