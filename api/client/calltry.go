package client

import (
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Bounds of one try of a claim, heartbeat or report. A try waits about a
// heartbeat interval: a node that does not answer in that time is probably
// frozen or gone, and the same call is sent again at once (to the new lease
// holder, once the channel has left the old one). At least minCallTry, so
// a live leader's Raft commit on a busy machine is not cut off, and at most
// maxCallTry, so that a Worker reaches a new leader well inside its grace
// (lease.TakeoverGrace counts on these bounds).
const (
	minCallTry = time.Second
	maxCallTry = 2 * time.Second
)

// callTry is how long one try of an attempt's call waits: the heartbeat
// interval within [minCallTry, maxCallTry], and never more than
// CallTimeout.
func (w *Worker) callTry(t *dexv1.Task) time.Duration {
	interval := time.Duration(t.GetHeartbeatIntervalMs()) * time.Millisecond
	if interval <= 0 {
		w.mu.Lock()
		interval = w.heartbeatInterval
		w.mu.Unlock()
	}
	return min(max(interval, minCallTry), maxCallTry, w.opts.CallTimeout)
}
