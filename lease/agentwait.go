package lease

import (
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// ReadyQueue names one of the broker's ready queues: an agent's model Steps
// (Model set) or one tool's Steps of an agent ("" is the default agent).
type ReadyQueue struct {
	Model bool
	Tool  string
	Agent string
}

// unservedQueues returns the FailUnservedStep commands owed to the Steps of
// ready queues that no live Worker serves for their agent: an agent's model
// that no Worker runs, or a tool served, but not for the queue's agent. A
// tool that no Worker serves at all is the tool wait's own case (due), and
// the default agent's model Steps wait for a model Worker as they always
// have. Called with w.mu held; it reads only the non-empty queues and, for
// an unserved one, its queued Steps through the state's queue index.
func (w *Workers) unservedQueues(t *Term, st *fsm.State, served map[string]bool, now time.Time) []*fsmpb.Command {
	if w.queues == nil {
		return nil
	}
	var out []*fsmpb.Command
	seen := map[ReadyQueue]bool{}
	for _, q := range w.queues.ReadyQueues() {
		if (q.Model && q.Agent == "") || (!q.Model && !served[q.Tool]) {
			continue
		}
		if q.Model && len(st.ModelServers(q.Agent)) > 0 || !q.Model && len(st.ToolServersFor(q.Tool, q.Agent)) > 0 {
			continue
		}
		seen[q] = true
		since, ok := w.unservedQ[q]
		if !ok {
			since = now
			w.unservedQ[q] = now
		}
		for _, s := range st.QueuedStepsFor(q.Model, q.Tool, q.Agent) {
			from := since
			if ready := time.UnixMilli(s.ReadyAtMs); ready.After(from) {
				from = ready // queued (or requeued) after its queue was found unserved
			}
			if waited := now.Sub(from); waited >= w.cfg.ToolWait {
				out = append(out, &fsmpb.Command{NowMs: now.UnixMilli(), Body: &fsmpb.Command_FailUnservedStep{FailUnservedStep: &fsmpb.FailUnservedStep{
					StepId: s.Id, Epoch: t.Epoch, WaitedMs: uint64(waited.Milliseconds()),
				}}})
			}
		}
	}
	for q := range w.unservedQ {
		if !seen[q] {
			delete(w.unservedQ, q) // served again, or empty
		}
	}
	return out
}
