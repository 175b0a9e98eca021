package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// SessionsByStatus counts the sessions in each status. It visits every
// session row once (no decoding): O(sessions).
func (s *State) SessionsByStatus() map[fsmpb.SessionStatus]int {
	out := map[fsmpb.SessionStatus]int{}
	for v := range fsmpb.SessionStatus_name {
		out[fsmpb.SessionStatus(v)] = 0
	}
	for sess := range s.tx.Sessions() {
		out[sess.Status]++
	}
	return out
}

// WorkerCount is the number of registered Workers.
func (s *State) WorkerCount() int { return count(s, store.TableWorkers) }
