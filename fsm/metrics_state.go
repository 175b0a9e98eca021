package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Lifecycle states of a session: open (it takes messages), closing (closed
// while a turn runs: the turn ends, then it is closed), closed, deleted (a
// tombstone the leader is purging).
const (
	LifecycleOpen    = "open"
	LifecycleClosing = "closing"
	LifecycleClosed  = "closed"
	LifecycleDeleted = "deleted"
)

// Lifecycles are the lifecycle states, in order.
var Lifecycles = []string{LifecycleOpen, LifecycleClosing, LifecycleClosed, LifecycleDeleted}

// Lifecycle is a session's lifecycle state.
func Lifecycle(s *fsmpb.Session) string {
	switch {
	case deleted(s):
		return LifecycleDeleted
	case isClosed(s):
		return LifecycleClosed
	case closing(s):
		return LifecycleClosing
	}
	return LifecycleOpen
}

// SessionCounts are the sessions counted by status and by lifecycle state,
// every value present (zero or not).
type SessionCounts struct {
	ByStatus    map[fsmpb.SessionStatus]int
	ByLifecycle map[string]int
}

// SessionCounts counts the sessions by status and by lifecycle state in one
// visit of every session row (no decoding): O(sessions).
func (s *State) SessionCounts() SessionCounts {
	c := SessionCounts{ByStatus: map[fsmpb.SessionStatus]int{}, ByLifecycle: map[string]int{}}
	for v := range fsmpb.SessionStatus_name {
		c.ByStatus[fsmpb.SessionStatus(v)] = 0
	}
	for _, l := range Lifecycles {
		c.ByLifecycle[l] = 0
	}
	for sess := range s.tx.Sessions() {
		if importing(sess) { // not a session yet
			continue
		}
		c.ByStatus[sess.Status]++
		c.ByLifecycle[Lifecycle(sess)]++
	}
	return c
}

// SessionsByStatus counts the sessions in each status: O(sessions).
func (s *State) SessionsByStatus() map[fsmpb.SessionStatus]int { return s.SessionCounts().ByStatus }

// WorkerCount is the number of registered Workers.
func (s *State) WorkerCount() int { return count(s, store.TableWorkers) }

// TableSize is what one table of the state holds: rows and encoded bytes.
type TableSize = store.TableSize

// TableSizes returns every table's rows and bytes, kept as Apply writes
// them: reading them costs nothing, and every node holding the same state
// has the same figures.
func (s *State) TableSizes() []TableSize { return s.tx.TableSizes() }
