//go:build e2e

package chaos

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// startNamedWorker starts a dexworker with an id of its own and extra flags.
func (e *env) startNamedWorker(name string, hold []string, args ...string) *harness.Worker {
	e.t.Helper()
	w := harness.NewWorker(harness.WorkerOptions{BinDir: binDir, Dir: e.dir, Name: name, Target: e.cluster.Target(), Ledger: e.ledger, Hold: hold, Args: args})
	e.workers = append(e.workers, w)
	if err := w.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.waitRegistered(w)
	return w
}

type workersStatus struct {
	Workers []struct {
		ID              string `json:"id"`
		Healthy         bool   `json:"healthy"`
		UnclaimedInARow uint32 `json:"unclaimed_in_a_row"`
	} `json:"workers"`
}

// A Worker that takes tasks and never claims them does not get their
// retries while a healthy Worker polls, and is shown unhealthy.
func TestStuckWorker_RetriesRunOnTheHealthyWorkerAndStatusShowsItUnhealthy(t *testing.T) {
	e := newEnv(t)
	// It holds every task before its claim, and keeps polling for more.
	e.startNamedWorker("stuck", []string{"before-claim"}, "--hold-all", "--concurrency", "32")

	// Attempt 1 of each session's first Step goes to the only Worker.
	var sessions []string
	for i := range 3 {
		id := e.createSession(fmt.Sprintf("hello %d", i))
		sessions = append(sessions, id)
		e.waitFor(id, 30*time.Second, "attempt 1 on the stuck Worker", func(r *dexv1.GetSessionResponse) bool {
			return len(r.Steps) > 0 && len(r.Steps[0].Attempts) > 0
		})
	}
	e.startNamedWorker("healthy", nil, "--poll-wait", "2s")

	ledger := map[string]string{} // step -> the Worker that ran it
	for _, id := range sessions {
		r := e.waitFor(id, 90*time.Second, "idle after the retries", func(r *dexv1.GetSessionResponse) bool {
			if r.Session.Status == dexv1.SessionStatus_SESSION_STATUS_ERRORED {
				t.Fatalf("session %s errored: steps %s", id, describe(r.Steps))
			}
			return r.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE
		})
		first := r.Steps[0]
		if first.Attempts[0].WorkerId != "stuck" {
			t.Fatalf("session %s: attempt 1 ran on %s; want the stuck Worker", id, first.Attempts[0].WorkerId)
		}
		for _, st := range r.Steps {
			if st.Outcome == dexv1.Outcome_OUTCOME_FAILED {
				t.Fatalf("session %s: step %s failed: %s", id, st.Id, describe([]*dexv1.Step{st}))
			}
			for i, at := range st.Attempts {
				if at.WorkerId != "stuck" {
					continue
				}
				if at.Status != dexv1.AttemptStatus_ATTEMPT_STATUS_EXPIRED || at.ClaimedAtMs != 0 {
					t.Fatalf("session %s: the stuck Worker's attempt %d of %s is %s, claimed at %d; want expired unclaimed", id, at.N, st.Id, at.Status, at.ClaimedAtMs)
				}
				if i+1 >= len(st.Attempts) || st.Attempts[i+1].WorkerId != "healthy" {
					t.Fatalf("session %s: the retry after the stuck Worker's attempt %d of %s did not run on the healthy Worker: %s", id, at.N, st.Id, describe([]*dexv1.Step{st}))
				}
			}
		}
		ledger[first.Id] = ""
	}

	// The ledger: the healthy Worker ran each first Step; the stuck one ran
	// nothing.
	for _, l := range e.ledgerEntries() {
		if l.Worker == "stuck" {
			t.Fatalf("the stuck Worker ran %+v", l)
		}
		if _, ok := ledger[l.Step]; ok {
			ledger[l.Step] = l.Worker
		}
	}
	for step, w := range ledger {
		if w != "healthy" {
			t.Fatalf("step %s ran on %q in the ledger; want the healthy Worker", step, w)
		}
	}

	var st workersStatus
	e.dexctl(&st, "status", "--json")
	shown := map[string]bool{}
	for _, w := range st.Workers {
		shown[w.ID] = w.Healthy
		if w.ID == "stuck" && (w.Healthy || w.UnclaimedInARow < 2) {
			t.Fatalf("status shows the stuck Worker %+v; want unhealthy with at least 2 unclaimed expiries in a row", w)
		}
	}
	if h, ok := shown["stuck"]; !ok || h {
		t.Fatalf("status workers %+v; want the stuck Worker listed unhealthy", st.Workers)
	}
	if h, ok := shown["healthy"]; ok && !h {
		t.Fatal("status shows the healthy Worker unhealthy")
	}
}

// A Worker stopped (SIGSTOP) right after it took a task lets that attempt
// expire unclaimed, but its long poll stays open on the leader. Neither the
// retry nor any later Step of the session goes to that poll while a healthy
// Worker polls: the turn costs one expiry, not one per Step.
func TestStuckWorker_AStoppedWorkerGetsNoFurtherStepOfTheSession(t *testing.T) {
	// The heartbeat timeout of a default cluster, as the issue measured.
	e := newEnv(t, "--heartbeat-timeout", "10s")
	stuck := e.startNamedWorker("stuck", []string{"before-claim"})
	began := time.Now()
	id := e.createSession("hello")
	if _, err := stuck.WaitHeld(e.ctx(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// Let its next long poll, sent as it took the task, reach the leader.
	time.Sleep(500 * time.Millisecond)
	if err := stuck.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.startNamedWorker("healthy", nil)

	r := e.waitFor(id, 90*time.Second, "idle after the turn", func(r *dexv1.GetSessionResponse) bool {
		if r.Session.Status == dexv1.SessionStatus_SESSION_STATUS_ERRORED {
			t.Fatalf("session %s errored: steps %s", id, describe(r.Steps))
		}
		return r.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE
	})
	t.Logf("turn took %s with the stuck Worker stopped (one expiry of 10 s; 22.5 s when the session's next Step went to it too): %s",
		time.Since(began).Round(100*time.Millisecond), describe(r.Steps))

	first := r.Steps[0]
	if len(first.Attempts) != 2 || first.Attempts[0].WorkerId != "stuck" || first.Attempts[1].WorkerId != "healthy" {
		t.Fatalf("the first RunModel ran %s; want attempt 1 on the stuck Worker and attempt 2 on the healthy one", describe([]*dexv1.Step{first}))
	}
	expiries := 0
	for _, st := range r.Steps {
		for _, at := range st.Attempts {
			if at.Status == dexv1.AttemptStatus_ATTEMPT_STATUS_EXPIRED {
				expiries++
			}
			if at.WorkerId == "stuck" && (st.Id != first.Id || at.N != 1) {
				t.Fatalf("the stuck Worker got attempt %d of %s after its first expiry: %s", at.N, st.Id, describe(r.Steps))
			}
		}
	}
	if expiries != 1 {
		t.Fatalf("%d attempts expired; want only the stuck Worker's first: %s", expiries, describe(r.Steps))
	}
	for _, l := range e.ledgerEntries() {
		if l.Worker == "stuck" {
			t.Fatalf("the stuck Worker ran %+v", l)
		}
	}
}
