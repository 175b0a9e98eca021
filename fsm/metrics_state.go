package fsm

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// SessionsByStatus counts the sessions in each status. It visits every
// session row once (no decoding): O(sessions).
func (s *State) SessionsByStatus() map[dexv1.SessionStatus]int {
	out := map[dexv1.SessionStatus]int{}
	for v := range dexv1.SessionStatus_name {
		out[dexv1.SessionStatus(v)] = 0
	}
	it, err := s.tx.Get(tableSessions, indexID)
	if err != nil {
		return out
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out[raw.(*fsmpb.Session).Status]++
	}
	return out
}

// WorkerCount is the number of registered Workers.
func (s *State) WorkerCount() int { return count(s, tableWorkers) }
