package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// WaitingTimers returns the waiting AwaitTimer Steps in due-time order,
// through their index: no other Step is read.
func (s *State) WaitingTimers() []*fsmpb.Step {
	return store.All[*fsmpb.Step](s.tx, store.TableSteps, store.IndexTimerDue)
}

// ErroredToResume returns the errored sessions that owe a ResumeErrored, in
// resume-time order, through their index: no other session is read.
func (s *State) ErroredToResume() []*fsmpb.Session {
	return store.All[*fsmpb.Session](s.tx, store.TableSessions, store.IndexResumeDue)
}
