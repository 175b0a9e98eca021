//go:build e2e

package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
)

// The rescue of a limit-paused agent, with real processes and full restarts:
// by an operator's drop, and by its parent's model calling resume_agent.

// rescueScript is rejectScript plus a parent that answers its child's pause
// by calling resume_agent for it with choice.
func rescueScript(dir, child, choice string) (script, rejecting string) {
	base, rejecting, _ := rejectScript(dir)
	rescue := fmt.Sprintf(`{"match": %q, "prefix": true, "outputs": [
   {"tool_calls": [{"tool": "resume_agent", "arguments": {"agent": %q, "choice": %q}}]},
   {"text": "rescued"}]},
 `, fmt.Sprintf("<child-paused agent=%q>", child), child, choice)
	return strings.Replace(base, `{"turns": [`, `{"turns": [`+"\n "+rescue, 1), rejecting
}

func (e *env) lookups(session string) int {
	e.t.Helper()
	return harness.Executions(e.ledgerEntries(), session, func(x harness.LedgerEntry) bool { return x.Tool == "lookup" })
}

func (e *env) send(session, msg string) {
	e.t.Helper()
	if _, err := e.client.SendMessage(e.ctx(20*time.Second), session, msg, ""); err != nil {
		e.t.Fatalf("send %q: %v", msg, err)
	}
}

// wantDropped checks the child's lookup result became the drop's note.
func wantDropped(t *testing.T, s *dexv1.Session) {
	t.Helper()
	for _, h := range s.History {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT && h.Tool == "lookup" {
			if !strings.Contains(h.Text, "its result was dropped") || !strings.Contains(h.Text, "the provider rejects this request") {
				t.Fatalf("the lookup result after the drop: %q", h.Text)
			}
			return
		}
	}
	t.Fatal("the lookup result is gone from the history")
}

// (e) Messages to an errored child retry its kept turn and count toward the
// pause (they do not replace the turn); a full restart retries it once more
// and it pauses. A message to the paused child waits; an operator's drop
// ends the turn and the child answers the waiting messages.
func TestRejected_MessagesCountTowardThePauseThenAnOperatorDropRescues(t *testing.T) {
	e := newEnv(t)
	script, rejecting, _ := rejectScript(e.dir)
	touch(t, rejecting)
	w := e.startWorker(script)
	start := time.Now()

	parent := e.createSession("parent")
	e.waitStatus(parent, sIdle, 20*time.Second)
	child := e.createChild(parent, "child")
	e.waitFor(child, 30*time.Second, "rejected once, errored", rejected(1, sErrored))
	e.send(child, "ping 1")
	r := e.waitFor(child, 30*time.Second, "rejected twice: the message retried the kept turn", rejected(2, sErrored))
	if len(r.Session.Inbox) != 1 || r.Session.Turn == nil {
		t.Fatalf("after the message: %d in the inbox, kept turn %v; want the message waiting behind the kept turn", len(r.Session.Inbox), r.Session.Turn != nil)
	}
	e.fullRestart()
	e.waitFor(child, 30*time.Second, "rejected 3 times, paused", rejected(3, sPaused))
	e.send(child, "ping 2")
	e.fullRestart()
	e.probe()
	if n := e.modelCalls(child); n != 4 {
		t.Fatalf("%d model calls for the child before the drop; want 4 (1 output, 3 rejections)", n)
	}
	e.waitFor(parent, 20*time.Second, "the parent idle with an empty inbox", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && len(r.Session.Inbox) == 0
	})
	if errs, paused := e.fromChild(parent, child); errs != 2 || paused != 1 {
		t.Fatalf("the parent got %d error and %d child-paused messages; want 2 and 1", errs, paused)
	}

	if err := e.client.ResumeSessionWith(e.ctx(20*time.Second), child, dexv1.ResumeChoice_RESUME_CHOICE_DROP); err != nil {
		t.Fatal(err)
	}
	r = e.waitStatus(child, sIdle, 30*time.Second)
	last := r.Session.History[len(r.Session.History)-1]
	if last.Kind != dexv1.HistoryKind_HISTORY_KIND_ASSISTANT || last.Text != "noted" || len(r.Session.Inbox) != 0 {
		t.Fatalf("after the drop: last entry %s %q, %d in the inbox", last.Kind, last.Text, len(r.Session.Inbox))
	}
	if r.Session.RejectedTurns != 0 || r.Session.TurnsFailed != 1 {
		t.Fatalf("after the drop: rejected turns %d, turns failed %d", r.Session.RejectedTurns, r.Session.TurnsFailed)
	}
	wantDropped(t, r.Session)
	if n := e.modelCalls(child); n != 5 {
		t.Fatalf("%d model calls for the child; want 5 (one for the waiting messages)", n)
	}
	if n := e.lookups(child); n != 1 {
		t.Fatalf("lookup ran %d times; want once", n)
	}
	if n := countEvents(e.events(child), "turn_dropped"); n != 1 {
		t.Fatalf("%d turn_dropped events; want 1", n)
	}
	if !w.Running() {
		t.Fatalf("the Worker died: %s", harness.Tail(w.Log(), 5))
	}
	t.Logf("wall time %.1f s", time.Since(start).Seconds())
}

// (f) The parent's model rescues its paused child: the child pauses across
// full restarts, its parent gets one <child-paused> and calls resume_agent
// with drop; the child is idle with its count cleared and calls no model
// again; the parent's turn goes on with the built-in's result.
func TestRejected_TheParentRescuesItsPausedChildWithResumeAgent(t *testing.T) {
	e := newEnv(t)
	child := fmt.Sprintf("kid-%d", time.Now().UnixNano())
	script, rejecting := rescueScript(e.dir, child, "drop")
	touch(t, rejecting)
	w := e.startWorker(script)
	start := time.Now()

	parent := e.createSession("parent")
	e.waitStatus(parent, sIdle, 20*time.Second)
	if _, err := e.client.CreateSession(e.ctx(20*time.Second), &dexv1.CreateSessionRequest{SessionId: child, ParentId: parent, Message: "child"}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(child, 30*time.Second, "rejected once, errored", rejected(1, sErrored))
	e.fullRestart()
	e.waitFor(child, 30*time.Second, "rejected twice, errored", rejected(2, sErrored))
	e.fullRestart()
	// The third rejection pauses the child; its parent answers at once.
	r := e.waitFor(child, 30*time.Second, "rescued by its parent: idle, count cleared", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && r.Session.RejectedTurns == 0 && r.Session.TurnsFailed == 1
	})
	wantDropped(t, r.Session)
	if n := countEvents(e.events(child), "session_paused"); n != 1 {
		t.Fatalf("the child paused %d times; want 1", n)
	}
	p := e.waitFor(parent, 20*time.Second, "the parent idle with an empty inbox", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && len(r.Session.Inbox) == 0
	})
	var rescue *dexv1.HistoryEntry
	for _, h := range p.Session.History {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT && h.Tool == fsm.BuiltinResumeAgent {
			if rescue != nil {
				t.Fatalf("the parent called resume_agent twice: %q, %q", rescue.Text, h.Text)
			}
			rescue = h
		}
	}
	if rescue == nil || rescue.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED || !strings.Contains(rescue.Text, fmt.Sprintf("agent %q resumed (drop)", child)) {
		t.Fatalf("the parent's resume_agent: %+v", rescue)
	}
	if last := p.Session.History[len(p.Session.History)-1]; last.Text != "rescued" {
		t.Fatalf("the parent's turn ended with %q; want rescued", last.Text)
	}
	if errs, paused := e.fromChild(parent, child); errs != 2 || paused != 1 {
		t.Fatalf("the parent got %d error and %d child-paused messages; want 2 and 1", errs, paused)
	}
	// Nothing waited in the child's inbox: the drop called no model.
	e.probe()
	if n := e.modelCalls(child); n != 4 {
		t.Fatalf("%d model calls for the child; want 4 (1 output, 3 rejections)", n)
	}
	if n := e.lookups(child); n != 1 {
		t.Fatalf("lookup ran %d times; want once", n)
	}
	if !w.Running() {
		t.Fatalf("the Worker died: %s", harness.Tail(w.Log(), 5))
	}
	t.Logf("wall time %.1f s", time.Since(start).Seconds())
}
