//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The rejected-turn pause (docs/model-failures.md), with real processes and full restarts:
// every dexd gets SIGKILL at once and restarts on its data dir, while the
// Worker keeps running.

const (
	sErrored = dexv1.SessionStatus_SESSION_STATUS_ERRORED
	sPaused  = dexv1.SessionStatus_SESSION_STATUS_PAUSED
)

// rejectScript: a "child" turn calls lookup, then its tool-result turn is
// rejected (invalid_request) while the file rejecting exists and hits an
// outage (server_error) while the file outage exists; with neither it is
// answered. "bad…" messages are always rejected; "good" is answered (the
// consumed "bad…" messages stay in the history before it, so the model sees
// them in the same run of user entries: "good" is matched first). Every
// other message (the parent's inbox: child errors and pauses) is noted.
func rejectScript(dir string) (script, rejecting, outage string) {
	rejecting, outage = filepath.Join(dir, "rejecting"), filepath.Join(dir, "outage")
	script = fmt.Sprintf(`{"turns": [
 {"match": "child", "outputs": [
   {"tool_calls": [{"tool": "lookup", "arguments": {"q": "x"}}]},
   {"error": {"type": "invalid_request", "message": "the provider rejects this request"}, "always": true, "while_file": %q},
   {"error": {"type": "server_error", "message": "the provider is down"}, "always": true, "while_file": %q},
   {"text": "recovered"}]},
 {"match": "good", "outputs": [{"text": "answered"}]},
 {"match": "bad", "prefix": true, "outputs": [{"error": {"type": "invalid_request", "message": "bad message"}, "always": true}]}
], "default": [{"text": "noted"}]}`, rejecting, outage)
	return script, rejecting, outage
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fullRestart SIGKILLs every node at once and restarts them on their data
// dirs.
func (e *env) fullRestart() {
	e.t.Helper()
	e.cluster.KillAll()
	if err := e.cluster.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.waitReady()
}

// probe proves the Worker is attached to the cluster: a fresh session is
// answered. After it, whatever the leader queued at its start has been
// handed out too.
func (e *env) probe() {
	e.t.Helper()
	id := e.createSession("probe")
	e.waitStatus(id, sIdle, 30*time.Second)
}

func (e *env) modelCalls(session string) int {
	e.t.Helper()
	return harness.Executions(e.ledgerEntries(), session, func(x harness.LedgerEntry) bool { return x.Kind == "model" })
}

// fromChild counts the messages a parent got from child (in its history and
// still in its inbox): "agent encountered an error" and <child-paused>.
func (e *env) fromChild(parent, child string) (errs, paused int) {
	e.t.Helper()
	s := e.get(parent).Session
	count := func(from, text string) {
		if from != child {
			return
		}
		if strings.Contains(text, "agent encountered an error") {
			errs++
		}
		if strings.Contains(text, fmt.Sprintf("<child-paused agent=%q>", child)) {
			paused++
		}
	}
	for _, h := range s.History {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_USER {
			count(h.FromSession, h.Text)
		}
	}
	for _, m := range s.Inbox {
		count(m.FromSession, m.Text)
	}
	return errs, paused
}

// events replays a session's events so far.
func (e *env) events(session string) []*dexv1.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var out []*dexv1.Event
	_ = e.client.WatchSession(ctx, session, 0, func(ev *dexv1.Event) error {
		out = append(out, ev)
		return nil
	})
	return out
}

func countEvents(evs []*dexv1.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func (e *env) createChild(parent, msg string) string {
	e.t.Helper()
	s, err := e.client.CreateSession(e.ctx(20*time.Second), &dexv1.CreateSessionRequest{
		SessionId: fmt.Sprintf("child-%d", time.Now().UnixNano()), ParentId: parent, Message: msg,
	})
	if err != nil {
		e.t.Fatalf("create child: %v", err)
	}
	return s.Id
}

func rejected(n uint32, st dexv1.SessionStatus) func(*dexv1.GetSessionResponse) bool {
	return func(r *dexv1.GetSessionResponse) bool {
		return r.Session.RejectedTurns == n && r.Session.Status == st
	}
}

// (a) a child whose tool-result turn is always rejected fails once per full
// restart and pauses on the 3rd rejection; a 4th restart does not call it.
// (b) Resume: one more try, paused again, one more <child-paused>.
// (c) An outage after a resume: errored, not paused; the next full restart
// recovers the turn.
func TestRejected_ChildPausesAcrossFullRestartsThenResumesAndRecovers(t *testing.T) {
	e := newEnv(t)
	script, rejecting, outage := rejectScript(e.dir)
	touch(t, rejecting)
	w := e.startWorker(script)
	start := time.Now()
	phase := start
	lap := func(what string) {
		t.Logf("%-52s %5.1f s", what, time.Since(phase).Seconds())
		phase = time.Now()
	}

	parent := e.createSession("parent")
	e.waitStatus(parent, sIdle, 20*time.Second)
	child := e.createChild(parent, "child")
	check := func(when string, calls, errs, paused int) {
		t.Helper()
		if n := e.modelCalls(child); n != calls {
			t.Fatalf("%s: %d model calls for the child; want %d", when, n, calls)
		}
		// The parent answers each message in a turn of its own; wait until
		// it has taken them in.
		e.waitFor(parent, 20*time.Second, "the parent idle with an empty inbox", func(r *dexv1.GetSessionResponse) bool {
			return r.Session.Status == sIdle && len(r.Session.Inbox) == 0
		})
		if ge, gp := e.fromChild(parent, child); ge != errs || gp != paused {
			t.Fatalf("%s: the parent got %d error and %d child-paused messages; want %d and %d", when, ge, gp, errs, paused)
		}
	}

	// (a) Rejection 1 in the first run, then one per full restart.
	e.waitFor(child, 30*time.Second, "rejected once, errored", rejected(1, sErrored))
	check("first rejection", 2, 1, 0)
	lap("(a) rejection 1: errored")
	e.fullRestart()
	e.waitFor(child, 30*time.Second, "rejected twice, errored", rejected(2, sErrored))
	check("after restart 1", 3, 2, 0)
	lap("(a) restart 1, rejection 2: errored")
	e.fullRestart()
	r := e.waitFor(child, 30*time.Second, "rejected 3 times, paused", rejected(3, sPaused))
	if r.Session.PauseReason != dexv1.PauseReason_PAUSE_REASON_LIMIT ||
		!strings.HasPrefix(r.Session.PauseMessage, "The provider rejected this turn 3 times in a row and the agent will not retry it on its own. Last error: ") ||
		!strings.Contains(r.Session.PauseMessage, "the provider rejects this request") {
		t.Fatalf("paused with reason %s: %q", r.Session.PauseReason, r.Session.PauseMessage)
	}
	check("after restart 2", 4, 2, 1)
	lap("(a) restart 2, rejection 3: paused")
	for i := 3; i <= 4; i++ {
		e.fullRestart()
		e.probe()
		if st := e.get(child).Session.Status; st != sPaused {
			t.Fatalf("restart %d: the paused child is %s", i, fsm.StatusName(fsmpb.SessionStatus(st)))
		}
		check(fmt.Sprintf("after restart %d", i), 4, 2, 1)
	}
	lap("(a) restarts 3 and 4: still paused, not called")

	// (b) Resume: exactly one more model call, paused again.
	if err := e.client.ResumeSession(e.ctx(20*time.Second), child); err != nil {
		t.Fatal(err)
	}
	e.waitFor(child, 30*time.Second, "rejected again after the resume, paused", rejected(4, sPaused))
	check("after the resume", 5, 2, 2)
	lap("(b) resume: one more try, paused again")

	// (c) An outage after a resume: retryable, so errored and not paused.
	os.Remove(rejecting)
	touch(t, outage)
	if err := e.client.ResumeSession(e.ctx(20*time.Second), child); err != nil {
		t.Fatal(err)
	}
	r = e.waitFor(child, 30*time.Second, "errored by the outage", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sErrored || r.Session.Status == sPaused
	})
	if r.Session.Status != sErrored || r.Session.PauseReason != dexv1.PauseReason_PAUSE_REASON_UNSPECIFIED ||
		r.Session.LastErrorType != dexv1.ErrorType_ERROR_TYPE_SERVER_ERROR || r.Session.RejectedTurns != 4 || r.Session.Turn == nil {
		t.Fatalf("after the outage: %s, pause reason %s, last error %s, rejected turns %d, kept turn %v",
			fsm.StatusName(fsmpb.SessionStatus(r.Session.Status)), r.Session.PauseReason, r.Session.LastErrorType, r.Session.RejectedTurns, r.Session.Turn != nil)
	}
	check("after the outage", 8, 3, 2) // 3 attempts of the retryable failure; one error message for the episode
	lap("(c) resume into an outage: 3 attempts, errored")
	e.cluster.KillAll()
	os.Remove(outage) // the provider is back when the cluster is
	if err := e.cluster.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitReady()
	r = e.waitStatus(child, sIdle, 30*time.Second)
	last := r.Session.History[len(r.Session.History)-1]
	if last.Kind != dexv1.HistoryKind_HISTORY_KIND_ASSISTANT || last.Text != "recovered" || r.Session.RejectedTurns != 0 {
		t.Fatalf("after the restart: last entry %s %q, rejected turns %d", last.Kind, last.Text, r.Session.RejectedTurns)
	}
	check("after the recovery", 9, 3, 2)
	if n := countEvents(e.events(child), "session_restarted"); n < 1 {
		t.Fatalf("the recovery was not a restart of the session: %d session_restarted events", n)
	}
	lap("(c) full restart: the turn recovered")
	if !w.Running() {
		t.Fatalf("the Worker died: %s", harness.Tail(w.Log(), 5))
	}
	t.Logf("wall time %.1f s", time.Since(start).Seconds())
}

// (d) Rejected messages are consumed and never count: three of them, a full
// restart in between that does not retry them, then a valid one is
// answered, and the session never pauses.
func TestRejected_ThreeRejectedMessagesThenAValidOneIsAnswered(t *testing.T) {
	e := newEnv(t)
	script, _, _ := rejectScript(e.dir)
	e.startWorker(script)
	start := time.Now()

	parent := e.createSession("parent")
	e.waitStatus(parent, sIdle, 20*time.Second)
	child := e.createChild(parent, "bad 1")
	failed := func(n uint64) func(*dexv1.GetSessionResponse) bool {
		return func(r *dexv1.GetSessionResponse) bool {
			return r.Session.Status == sErrored && r.Session.TurnsFailed == n
		}
	}
	send := func(msg string) {
		t.Helper()
		if _, err := e.client.SendMessage(e.ctx(20*time.Second), child, msg, ""); err != nil {
			t.Fatalf("send %q: %v", msg, err)
		}
	}
	e.waitFor(child, 30*time.Second, "the first message rejected", failed(1))
	send("bad 2")
	e.waitFor(child, 30*time.Second, "the second message rejected", failed(2))
	// A full restart does not retry a consumed message.
	e.fullRestart()
	e.probe()
	if n := e.modelCalls(child); n != 2 {
		t.Fatalf("after the restart: %d model calls; want 2", n)
	}
	send("bad 3")
	r := e.waitFor(child, 30*time.Second, "the third message rejected", failed(3))
	if r.Session.RejectedTurns != 0 || r.Session.Turn != nil {
		t.Fatalf("rejected messages counted: rejected turns %d, kept turn %v", r.Session.RejectedTurns, r.Session.Turn != nil)
	}
	send("good")
	r = e.waitStatus(child, sIdle, 30*time.Second)
	last := r.Session.History[len(r.Session.History)-1]
	if last.Text != "answered" || r.Session.RejectedTurns != 0 {
		t.Fatalf("the valid message: last entry %q, rejected turns %d", last.Text, r.Session.RejectedTurns)
	}
	if n := e.modelCalls(child); n != 4 {
		t.Fatalf("%d model calls; want 4", n)
	}
	if n := countEvents(e.events(child), "session_paused"); n != 0 {
		t.Fatalf("the session paused %d times", n)
	}
	e.waitFor(parent, 20*time.Second, "the parent idle with an empty inbox", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && len(r.Session.Inbox) == 0
	})
	if errs, paused := e.fromChild(parent, child); errs != 3 || paused != 0 {
		t.Fatalf("the parent got %d error and %d child-paused messages; want 3 and 0", errs, paused)
	}
	t.Logf("wall time %.1f s", time.Since(start).Seconds())
}
