package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// ResumeDue is when the leader owes an errored session a ResumeErrored (ok
// false when it owes none).
func ResumeDue(s *fsmpb.Session) (int64, bool) { return store.ResumeDue(s) }

// TimerDue is when the leader owes a Step a FireTimer (ok false when it
// owes none).
func TimerDue(st *fsmpb.Step) (int64, bool) { return store.TimerDue(st) }
