package lease

import "time"

// What a Worker of the Go library (api/client) needs after its leader
// froze or died before its next heartbeat or report reaches the new leader:
//   - workerDetect: its channel notices that the old leader stopped
//     answering (client.DetectTime: a probe every 500 ms, 1 s to answer; a
//     dead leader's connections close at once);
//   - one try of the call lost on the old leader (client.callTry: the
//     heartbeat interval, between 1 and 2 s); the repeat goes out at once;
//   - a heartbeat interval until its next heartbeat is due.
const (
	workerDetect     = 1500 * time.Millisecond
	workerMinCallTry = time.Second
	workerMaxCallTry = 2 * time.Second
)

// TakeoverGrace is how long a new leader keeps a running attempt alive
// before it hears from the attempt's Worker: twice what a Worker needs to
// reach it (the margin covers a busy machine, the new leader's first
// commits and Workers of other libraries), and never less than the
// steady-state heartbeat timeout, so a Worker that reattaches within a
// heartbeat timeout keeps its attempt as it always did. The clock starts
// when the new leader establishes itself, after the Worker started
// noticing, so the margin is larger still.
func TakeoverGrace(interval, timeout time.Duration) time.Duration {
	try := min(max(interval, workerMinCallTry), workerMaxCallTry)
	need := workerDetect + try + interval
	return max(timeout, 2*need)
}
