package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// WaitingTimers returns the waiting AwaitTimer Steps in due-time order,
// through their index: no other Step is read.
func (s *State) WaitingTimers() []*fsmpb.Step {
	return all[*fsmpb.Step](s.tx, tableSteps, indexTimerDue)
}

// ErroredToResume returns the errored sessions that owe a ResumeErrored, in
// resume-time order, through their index: no other session is read.
func (s *State) ErroredToResume() []*fsmpb.Session {
	return all[*fsmpb.Session](s.tx, tableSessions, indexResumeDue)
}
