//go:build e2e

package chaos

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// Worker protocol end to end on a real 3-node cluster: dexd and dexworker
// processes on loopback.

const (
	kRunModel = dexv1.StepKind_STEP_KIND_RUN_MODEL
	kCallTool = dexv1.StepKind_STEP_KIND_CALL_TOOL
	kSingle   = dexv1.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL
	kApproval = dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL
	kQuestion = dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER
	kTimer    = dexv1.StepKind_STEP_KIND_AWAIT_TIMER
	kPoll     = dexv1.StepKind_STEP_KIND_POLL_TOOL_TASK
	sIdle     = dexv1.SessionStatus_SESSION_STATUS_IDLE
	sWaiting  = dexv1.SessionStatus_SESSION_STATUS_WAITING
)

type showJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Steps  []struct {
		ID       string `json:"id"`
		Kind     string `json:"kind"`
		Tool     string `json:"tool"`
		CallID   string `json:"call_id"`
		Outcome  string `json:"outcome"`
		Attempts []struct {
			N        int    `json:"n"`
			Worker   string `json:"worker"`
			Progress string `json:"progress"`
		} `json:"attempts"`
	} `json:"steps"`
}

func toolCalls(l []harness.LedgerEntry, session string) map[string]int {
	out := map[string]int{}
	for _, e := range l {
		if e.Session == session && e.Kind == "tool" {
			out[e.CallID]++
		}
	}
	return out
}

// The check of the Workers issue: the demo session through dexctl, then the
// leader is killed and the same Worker process finishes a second session.
func TestWorkers_DemoSessionThenTakeoverWithTheSameWorker(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker("")
	demo := func() string {
		var started struct {
			ID string `json:"id"`
		}
		e.dexctl(&started, "session", "start", "--message", "demo", "--json")
		if started.ID == "" {
			t.Fatal("session start printed no id")
		}
		var show showJSON
		deadline := time.Now().Add(20 * time.Second)
		for {
			e.dexctl(&show, "session", "show", started.ID, "--json")
			if show.Status == "idle" || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if show.Status != "idle" {
			t.Fatalf("session %s is %s after 20 s; want idle", started.ID, show.Status)
		}
		kinds := map[string]int{}
		for _, st := range show.Steps {
			kinds[st.Kind]++
			if st.Outcome != "succeeded" {
				t.Fatalf("step %s (%s %s) is %q; want succeeded", st.ID, st.Kind, st.Tool, st.Outcome)
			}
		}
		if kinds["RunModel"] < 2 || kinds["CallTool"] < 2 || kinds["CallSingleAttemptTool"] < 1 {
			t.Fatalf("steps by kind %v; want at least 2 RunModel, 2 CallTool, 1 CallSingleAttemptTool", kinds)
		}
		calls := toolCalls(e.ledgerEntries(), started.ID)
		for _, st := range show.Steps {
			if st.CallID != "" && calls[st.CallID] != 1 {
				t.Fatalf("call %s (%s) has %d ledger lines; want 1", st.CallID, st.Tool, calls[st.CallID])
			}
		}
		return started.ID
	}
	demo()
	leader := e.leader()
	killed := time.Now()
	leader.Kill()
	second := demo()
	r := e.get(second)
	first := stepsBy(r, kRunModel, "")[0]
	t.Logf("takeover seen by the Worker: its first task on the new leader started %d ms after the leader was killed",
		first.Attempts[0].StartedAtMs-killed.UnixMilli())
	for _, st := range r.Steps {
		for _, a := range st.Attempts {
			if a.WorkerId != w.Name {
				t.Fatalf("step %s ran on %s; want the same Worker %s", st.Id, a.WorkerId, w.Name)
			}
		}
	}
	if !w.Running() {
		t.Fatal("the Worker died in the takeover")
	}
}

const everyPolicyScript = `{"turns": [
 {"match": "all", "outputs": [
   {"tool_calls": [
     {"tool": "lookup", "arguments": {"q": "x"}},
     {"tool": "save_note", "arguments": {"note": "n"}},
     {"tool": "send_email", "arguments": {"to": "a@b"}},
     {"tool": "deploy", "arguments": {"env": "prod"}},
     {"tool": "build", "arguments": {"target": "app"}},
     {"tool": "ask_user", "arguments": {"question": "which region?"}},
     {"tool": "sleep", "arguments": {"seconds": 1}}]},
   {"text": "all done"}]},
 {"match": "deny", "outputs": [
   {"tool_calls": [{"tool": "deploy", "arguments": {"env": "prod"}}]},
   {"text": "not deployed"}]},
 {"match": "parallel", "outputs": [
   {"tool_calls": [
     {"tool": "lookup", "arguments": {"q": 1, "sleep_ms": 1500}},
     {"tool": "lookup", "arguments": {"q": 2, "sleep_ms": 1500}},
     {"tool": "lookup", "arguments": {"q": 3, "sleep_ms": 1500}}]},
   {"text": "looked up"}]},
 {"match": "rogue", "outputs": [
   {"tool_calls": [{"tool": "rm_rf", "arguments": {}}]},
   {"text": "could not"}]}
]}`

func TestWorkers_ASessionThroughEveryPolicy(t *testing.T) {
	e := newEnv(t)
	e.startWorker(everyPolicyScript)
	id := e.createSession("all")
	r := e.waitFor(id, 20*time.Second, "an approval and a question waiting", func(r *dexv1.GetSessionResponse) bool {
		return len(stepsBy(r, kApproval, "")) == 1 && len(stepsBy(r, kQuestion, "")) == 1 && r.Session.Status == sWaiting
	})
	ap, q := stepsBy(r, kApproval, "")[0], stepsBy(r, kQuestion, "")[0]
	if q.Prompt != "which region?" {
		t.Fatalf("question %q", q.Prompt)
	}
	ctx := e.ctx(20 * time.Second)
	if err := e.client.ResolveApproval(ctx, ap.Id, true, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.client.ResolveApproval(ctx, ap.Id, true, ""); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second approval: %v; want FailedPrecondition", err)
	}
	if err := e.client.AnswerQuestion(ctx, q.Id, "eu-west"); err != nil {
		t.Fatal(err)
	}
	r = e.waitStatus(id, sIdle, 30*time.Second)
	for _, st := range r.Steps {
		if st.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
			t.Fatalf("step %s %s is %v:\n%s", st.Id, st.Tool, st.Outcome, describe(r.Steps))
		}
	}
	l := e.ledgerEntries()
	for _, tool := range []string{"lookup", "save_note", "send_email", "deploy", "build"} {
		if n := harness.Executions(l, id, func(x harness.LedgerEntry) bool { return x.Tool == tool && x.Kind == "tool" }); n != 1 {
			t.Fatalf("%s ran %d times; want 1", tool, n)
		}
	}
	polls := stepsBy(r, kPoll, "build")
	if len(polls) < 2 {
		t.Fatalf("%d polls of the build task", len(polls))
	}
	for _, p := range polls {
		if p.TaskId == "" || p.TaskId != polls[0].TaskId {
			t.Fatalf("polls name tasks %q and %q", polls[0].TaskId, p.TaskId)
		}
	}
	if n := len(stepsBy(r, kTimer, "")); n != 1 {
		t.Fatalf("%d timers", n)
	}
	if n := len(stepsBy(r, kRunModel, "")); n != 2 {
		t.Fatalf("%d RunModel steps; want 2", n)
	}
}

func TestWorkers_DeniedToolNeverRuns(t *testing.T) {
	e := newEnv(t)
	e.startWorker(everyPolicyScript)
	id := e.createSession("deny")
	r := e.waitFor(id, 20*time.Second, "an approval waiting", func(r *dexv1.GetSessionResponse) bool { return len(stepsBy(r, kApproval, "")) == 1 })
	if err := e.client.ResolveApproval(e.ctx(10*time.Second), stepsBy(r, kApproval, "")[0].Id, false, "not today"); err != nil {
		t.Fatal(err)
	}
	r = e.waitStatus(id, sIdle, 20*time.Second)
	if n := harness.Executions(e.ledgerEntries(), id, func(x harness.LedgerEntry) bool { return x.Tool == "deploy" }); n != 0 {
		t.Fatalf("a denied deploy ran %d times", n)
	}
	var denied bool
	for _, h := range r.Session.History {
		denied = denied || (h.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT && strings.Contains(h.Text, "not today"))
	}
	if !denied {
		t.Fatal("the model was not told the call was denied")
	}
}

func TestWorkers_ParallelToolCallsRunAtOnce(t *testing.T) {
	e := newEnv(t)
	e.startWorker(everyPolicyScript)
	id := e.createSession("parallel")
	r := e.waitStatus(id, sIdle, 30*time.Second)
	calls := stepsBy(r, kCallTool, "lookup")
	if len(calls) != 3 {
		t.Fatalf("%d lookup steps", len(calls))
	}
	// Every call started before any of them ended: they ran side by side.
	var lastStart, firstEnd int64 = 0, 1 << 62
	for _, st := range calls {
		a := st.Attempts[len(st.Attempts)-1]
		lastStart = max(lastStart, a.StartedAtMs)
		firstEnd = min(firstEnd, a.EndedAtMs)
	}
	if lastStart >= firstEnd {
		t.Fatalf("the calls ran one after another: last start %d, first end %d", lastStart, firstEnd)
	}
}

func TestWorkers_UnknownToolIsARecordedFailedCall(t *testing.T) {
	e := newEnv(t)
	e.startWorker(everyPolicyScript)
	id := e.createSession("rogue")
	r := e.waitStatus(id, sIdle, 20*time.Second)
	var failed bool
	for _, h := range r.Session.History {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT && h.Tool == "rm_rf" {
			failed = h.Outcome == dexv1.Outcome_OUTCOME_FAILED && strings.Contains(h.Text, "unknown tool")
		}
	}
	if !failed {
		t.Fatal("no failed result for the unknown tool")
	}
}

const killScript = `{"turns": [
 {"match": "read", "outputs": [{"tool_calls": [{"tool": "lookup", "arguments": {"q": "x"}}]}, {"text": "ok"}]},
 {"match": "email", "outputs": [{"tool_calls": [{"tool": "send_email", "arguments": {"to": "a@b"}}]}, {"text": "ok"}]}
]}`

func TestWorkers_WorkerKilledMidAttempt(t *testing.T) {
	cases := []struct {
		msg, tool    string
		kind         dexv1.StepKind
		wantOutcome  dexv1.Outcome
		wantAttempts int
	}{
		{"read", "lookup", kCallTool, dexv1.Outcome_OUTCOME_SUCCEEDED, 2},
		{"email", "send_email", kSingle, dexv1.Outcome_OUTCOME_UNKNOWN, 1},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			e := newEnv(t)
			w := e.startWorker(killScript, "tool-running")
			id := e.createSession(c.msg)
			if _, err := w.WaitHeld(e.ctx(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			w.Kill()
			e.startWorker(killScript)
			r := e.waitStatus(id, sIdle, 30*time.Second)
			st := stepsBy(r, c.kind, c.tool)
			if len(st) != 1 || st[0].Outcome != c.wantOutcome || len(st[0].Attempts) != c.wantAttempts {
				t.Fatalf("%s after a Worker kill:\n%s", c.tool, describe(r.Steps))
			}
			if p := st[0].Attempts[0].Progress; p != dexv1.AttemptProgress_ATTEMPT_PROGRESS_NOT_COMPLETED {
				t.Fatalf("the claimed attempt failed with progress %s", p)
			}
			runs := harness.Executions(e.ledgerEntries(), id, func(x harness.LedgerEntry) bool { return x.Tool == c.tool })
			if c.kind == kSingle && runs != 0 {
				t.Fatalf("the single-attempt tool ran %d times after its Worker died holding it", runs)
			}
			if c.kind == kCallTool && runs != 1 {
				t.Fatalf("the read ran %d times; want once, on the new Worker", runs)
			}
		})
	}
}

// The leader dies while a Worker holds a RunModel attempt: the Worker finishes
// it on the new leader and the model is not called again.
func TestWorkers_LeaderKilledMidAttemptDoesNotRepeatTheModelCall(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker("", "before-model")
	id := e.createSession("demo")
	if _, err := w.WaitHeld(e.ctx(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	old := e.leader()
	old.Kill()
	if next := e.leader(); next == old {
		t.Fatal("no new leader")
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	r := e.waitStatus(id, sIdle, 30*time.Second)
	model := stepsBy(r, kRunModel, "")[0]
	if len(model.Attempts) != 1 || model.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
		t.Fatalf("the first RunModel after the takeover:\n%s", describe(r.Steps))
	}
	calls := harness.Executions(e.ledgerEntries(), id, func(x harness.LedgerEntry) bool { return x.Step == model.Id })
	if calls != 1 {
		t.Fatalf("the model was called %d times for %s; want 1", calls, model.Id)
	}
	// The killed node restarts and rejoins.
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	_ = old.Signal(syscall.Signal(0))
}

// A watch resumes on the new leader from the last event it delivered: no
// event is missed or repeated across a takeover.
func TestWorkers_WatchResumesAcrossATakeover(t *testing.T) {
	e := newEnv(t)
	e.startWorker("")
	id := e.createSession("demo")
	e.waitStatus(id, sIdle, 20*time.Second)

	// watch collects a session's event seqs until n turns completed.
	watch := func(turns int) []uint64 {
		var seqs []uint64
		done := 0
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		enough := errors.New("enough")
		err := e.client.WatchSession(ctx, id, 0, func(ev *dexv1.Event) error {
			seqs = append(seqs, ev.Seq)
			if ev.Type == "turn_completed" {
				done++
			}
			if done == turns {
				return enough
			}
			if done == 1 && ev.Type == "turn_completed" {
				// The first turn is in: the leader dies mid-watch and the
				// second turn is sent through the new one.
				e.leader().Kill()
				go func() { _, _ = e.client.SendMessage(ctx, id, "again", "watch-again") }()
			}
			return nil
		})
		if !errors.Is(err, enough) {
			t.Fatalf("watch ended after %d events: %v", len(seqs), err)
		}
		return seqs
	}
	seen := watch(2)
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("event %d came after %d: repeated or out of order", seen[i], seen[i-1])
		}
	}
	e.waitStatus(id, sIdle, 30*time.Second)
	// A fresh watch from the start on the new leader gives the same list.
	var all []uint64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	turns, enough := 0, errors.New("enough")
	_ = e.client.WatchSession(ctx, id, 0, func(ev *dexv1.Event) error {
		all = append(all, ev.Seq)
		if ev.Type == "turn_completed" {
			turns++
		}
		if turns == 2 {
			return enough
		}
		return nil
	})
	if len(all) != len(seen) {
		t.Fatalf("the watch across the takeover saw %d events; the session has %d", len(seen), len(all))
	}
	for i := range all {
		if all[i] != seen[i] {
			t.Fatalf("event %d: watched seq %d, stored %d", i, seen[i], all[i])
		}
	}
}
