package main

import (
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/cluster"
)

// drainRecheck bounds how long the drain waits without looking at the node's
// leadership (the running-Steps watch wakes it only when one starts or stops).
const drainRecheck = 250 * time.Millisecond

// drain is the first part of a planned step-down of a leader. The node stops
// handing out tasks at once (open polls end with Unavailable, /readyz is 503
// "draining") and fails no attempt any more, but keeps leading and serving
// the calls of the attempts already running, so a Complete that arrives now
// commits here. It returns when no attempt runs, when this node no longer
// leads, when timeout passes, or on another signal. An attempt still running
// then is left to the next leader, which re-arms it with its grace period.
// A node that does not lead returns at once.
func drain(node *cluster.Node, timeout time.Duration, again <-chan os.Signal, log *zap.Logger) {
	if !node.IsLeader() {
		return
	}
	node.Drain()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	log.Info("draining before handing leadership over", zap.Duration("drain_timeout", timeout))
	for {
		st := node.State()
		running, changed := st.RunningSteps() // changed fires when a Step starts or stops running
		switch {
		case running == 0:
			log.Info("drained: no attempt is running", zap.Duration("took", time.Since(start)))
			return
		case !node.IsLeader():
			log.Info("leadership lost while draining", zap.Int("running_attempts", running))
			return
		}
		recheck := time.NewTimer(drainRecheck)
		select {
		case <-changed:
			recheck.Stop()
		case <-st.Abandoned():
			recheck.Stop()
		case <-recheck.C:
		case <-deadline.C:
			recheck.Stop()
			log.Warn("drain timeout passed; the next leader takes over the attempts still running",
				zap.Int("running_attempts", running), zap.Duration("drain_timeout", timeout))
			return
		case sig := <-again:
			recheck.Stop()
			log.Warn("second signal while draining; handing over now", zap.String("signal", sig.String()),
				zap.Int("running_attempts", running))
			return
		}
	}
}
