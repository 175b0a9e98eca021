package fsm

import dexv1 "github.com/dexhq/dex/api/dexv1"

// SessionsByStatus counts the sessions in each status through the status
// index. It visits every session row once (no decoding): O(sessions).
func (s *State) SessionsByStatus() map[dexv1.SessionStatus]int {
	out := map[dexv1.SessionStatus]int{}
	for v := range dexv1.SessionStatus_name {
		st := dexv1.SessionStatus(v)
		n := 0
		eachSessionIn(s.tx, st, func(*dexv1.Session) bool { n++; return true })
		out[st] = n
	}
	return out
}

// WorkerCount is the number of registered Workers.
func (s *State) WorkerCount() int { return count(s, tableWorkers) }
