//go:build e2e

package chaos

import (
	"fmt"
	"github.com/dexhq/dex/chaos/harness"
	"testing"
	"time"
)

// A follower's log writes sleep (FailpointSlowDisk): while one write
// sleeps, that node applies nothing new though the cluster commits and
// serves; with a shorter sleep it keeps up slowly, and once the failpoint
// is off every node holds the same log. The stalled write sleeps 5 s: the
// turn served meanwhile and the check of both nodes take well under a
// second, and the test waits out the rest before the logs converge.
func TestSlowDisk_SlowsOneNodeAndLosesNothing(t *testing.T) {
	e, fpHTTP := newNetEnv(t, "")
	e.startWorker("")
	e.serveOne("before the slow disk")
	leader := e.leader()
	f := followerOf(e.cluster, leader)
	waitConverged(t, e.cluster, 60*time.Second)

	if err := harness.SetFailpoint(fpHTTP[f], harness.FailpointSlowDisk, `sleep("5s")`); err != nil {
		t.Fatal(err)
	}
	stuckAt := raftState(t, e.cluster, f).AppliedIndex
	e.serveOne("while the disk stalls")
	if ls, fs := raftState(t, e.cluster, leader), raftState(t, e.cluster, f); fs.AppliedIndex != stuckAt || ls.AppliedIndex <= stuckAt {
		t.Fatalf("while %s's log write sleeps it applied %d (was %d) and the leader %d: want %s stuck and the leader ahead", f.ID, fs.AppliedIndex, stuckAt, ls.AppliedIndex, f.ID)
	}

	if err := harness.SetFailpoint(fpHTTP[f], harness.FailpointSlowDisk, "sleep(100)"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, e.serveOne(fmt.Sprintf("slow disk %d", i)))
	}
	if err := harness.SetFailpoint(fpHTTP[f], harness.FailpointSlowDisk, ""); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, e.cluster, 90*time.Second)
	for _, id := range ids {
		e.waitStatus(id, sIdle, 10*time.Second)
	}
}
