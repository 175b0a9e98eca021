//go:build e2e

package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// Agents with real processes: a session's model Steps go only to a Worker
// that runs its agent's model (issue 16's routing checks).

// startAgentWorker starts a dexworker that runs the model of agent only.
func (e *env) startAgentWorker(agent string) *harness.Worker {
	e.t.Helper()
	o := harness.WorkerOptions{BinDir: binDir, Dir: e.dir, Name: fmt.Sprintf("w%d-%s", len(e.workers)+1, strings.ReplaceAll(agent, "@", "-")),
		Target: e.cluster.Target(), Ledger: e.ledger, TLS: e.cluster.TLS(), Args: []string{"--agent", agent}}
	token, err := e.cluster.WorkerToken(e.ctx(30*time.Second), o.Name)
	if err != nil {
		e.t.Fatal(err)
	}
	o.Token = token
	w := harness.NewWorker(o)
	e.workers = append(e.workers, w)
	if err := w.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.waitRegistered(w)
	return w
}

func (e *env) createAgentSession(agent, msg string) string {
	e.t.Helper()
	id := fmt.Sprintf("s-%s-%d", strings.ReplaceAll(agent, "@", "-"), time.Now().UnixNano())
	s, err := e.client.CreateSession(e.ctx(20*time.Second), &dexv1.CreateSessionRequest{SessionId: id, Agent: agent, Message: msg})
	if err != nil {
		e.t.Fatalf("create a session of %s: %v", agent, err)
	}
	if s.Agent != agent {
		e.t.Fatalf("session %s runs agent %q; want %q", id, s.Agent, agent)
	}
	return id
}

// checkModelRanOnlyOn checks that every model call of each session, in the
// ledger and in its RunModel attempts, was made by worker.
func (e *env) checkModelRanOnlyOn(sessions []string, worker string) {
	e.t.Helper()
	byWorker := map[string]map[string]int{} // session -> worker -> model calls
	for _, l := range e.ledgerEntries() {
		if l.Kind == "model" {
			if byWorker[l.Session] == nil {
				byWorker[l.Session] = map[string]int{}
			}
			byWorker[l.Session][l.Worker]++
		}
	}
	for _, id := range sessions {
		calls := byWorker[id]
		if len(calls) != 1 || calls[worker] < 2 {
			e.t.Errorf("session %s: model calls by Worker %v; want only %s, at least 2 (the demo's two RunModel Steps)", id, calls, worker)
		}
		r := e.waitStatus(id, sIdle, 30*time.Second)
		for _, st := range stepsBy(r, kRunModel, "") {
			for _, a := range st.Attempts {
				if a.WorkerId != worker {
					e.t.Errorf("session %s: RunModel attempt %s#%d ran on %s; want %s", id, st.Id, a.N, a.WorkerId, worker)
				}
			}
		}
	}
}

func TestAgents_WorkersOfTwoAgentsNeverTakeEachOthersRunModelAndANewVersionGetsOnlyItsSessions(t *testing.T) {
	e := newEnv(t, "--tool-wait", "5s")
	alpha1 := e.startAgentWorker("alpha@1")
	beta1 := e.startAgentWorker("beta@1")

	// A session of an agent no Worker runs waits, says why, and fails after
	// the tool wait naming its agent.
	ghost := e.createAgentSession("ghost@1", "hi")
	r := e.get(ghost)
	if st := stepsBy(r, kRunModel, ""); len(st) != 1 || !strings.Contains(st[0].WaitingReason, `agent "ghost@1"`) {
		t.Fatalf("ghost@1's RunModel does not say it waits for a Worker of its agent:\n%s", describe(r.Steps))
	}

	var alphas, betas []string
	for range 3 {
		alphas = append(alphas, e.createAgentSession("alpha@1", "hi"))
		betas = append(betas, e.createAgentSession("beta@1", "hi"))
	}
	for _, id := range append(append([]string{}, alphas...), betas...) {
		e.waitStatus(id, sIdle, 30*time.Second)
	}
	e.checkModelRanOnlyOn(alphas, alpha1.Name)
	e.checkModelRanOnlyOn(betas, beta1.Name)

	r = e.waitStatus(ghost, dexv1.SessionStatus_SESSION_STATUS_ERRORED, 30*time.Second)
	if !strings.Contains(r.Session.LastError, `no live Worker served agent "ghost@1"`) {
		t.Fatalf("ghost@1's session errored with %q; want the unserved agent named", r.Session.LastError)
	}
	for _, st := range stepsBy(r, kRunModel, "") {
		if len(st.Attempts) != 0 {
			t.Fatalf("ghost@1's RunModel ran:\n%s", describe(r.Steps))
		}
	}

	// A new version of alpha: its Worker gets only alpha@2's sessions, and
	// alpha@1's keep going to alpha@1's Worker.
	alpha2 := e.startAgentWorker("alpha@2")
	var news, olds []string
	for range 3 {
		news = append(news, e.createAgentSession("alpha@2", "hi"))
		olds = append(olds, e.createAgentSession("alpha@1", "hi"))
	}
	for _, id := range append(append([]string{}, news...), olds...) {
		e.waitStatus(id, sIdle, 30*time.Second)
	}
	e.checkModelRanOnlyOn(news, alpha2.Name)
	e.checkModelRanOnlyOn(olds, alpha1.Name)
}
