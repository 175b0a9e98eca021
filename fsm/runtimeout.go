package fsm

import (
	"fmt"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// runTimeout is how long the attempt c starts may run, in ms (0: no limit):
// a tool Step's policy, or for a model Step the run timeout its Worker
// registered; else the leader's default carried in the command. It reads
// only the state and the command, so every node stores the same deadline.
func (a *applier) runTimeout(st *fsmpb.Step, c *fsmpb.StartAttempt) int64 {
	var d uint32
	if Kind(st.Kind).Runner == RunsOnModel {
		if w := (&State{tx: a.tx}).Worker(c.WorkerId); w != nil {
			d = w.ModelRunTimeoutMs
		}
	} else {
		d = st.Policy.GetRunTimeoutMs()
	}
	if d == 0 {
		d = c.DefaultRunTimeoutMs
	}
	return int64(d)
}

// RunTimeoutText writes a run timeout for people ("30s", "1h0m0s").
func RunTimeoutText(ms uint32) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

// timeoutAttempt fails a running attempt that ran past its run deadline, even
// though its Worker may still heartbeat it: error type timeout, then the
// Step's policy decides as for any failed attempt.
func (a *applier) timeoutAttempt(c *fsmpb.TimeoutAttempt) *Result {
	st, at, r := a.runningAttempt(c.StepId, c.Attempt)
	if r != nil {
		return rejected(r)
	}
	if at.DeadlineMs == 0 {
		return rejected(reject(CodeFailedPrecondition, "attempt %s has no run timeout", at.Token))
	}
	if a.now < at.DeadlineMs {
		return rejected(reject(CodeFailedPrecondition, "attempt %s may run until %d ms; it is %d ms", at.Token, at.DeadlineMs, a.now))
	}
	at.Status = fsmpb.AttemptStatus_ATTEMPT_STATUS_FAILED
	at.ErrorType = fsmpb.ErrorType_ERROR_TYPE_TIMEOUT
	at.Error = RunTimeoutError(at)
	return a.attemptEnded(st, at)
}

// RunTimeoutError is the error recorded for an attempt that ran past its run
// deadline.
func RunTimeoutError(at *fsmpb.Attempt) string {
	return fmt.Sprintf("the attempt ran past its run timeout of %s", RunTimeoutText(uint32(at.DeadlineMs-at.StartedAtMs)))
}
