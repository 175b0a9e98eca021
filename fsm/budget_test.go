package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// createWithBudget creates session id (child of parent when given) with a
// first message and budget b.
func (d *driver) createWithBudget(id, parent string, b *fsmpb.Budget) {
	d.t.Helper()
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: id, ParentId: parent, MessageId: id + "-m0", Message: "go", Budget: b,
	}}})
}

// answerUsing is the model's answer with usage u.
func (h *handle) answerUsing(u *fsmpb.Usage, text string, calls ...*fsmpb.ToolCall) {
	h.d.t.Helper()
	h.d.do(h.report(&fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{
		Text: text, ToolCalls: calls, Usage: u,
	}}}))
}

func usage(in, out, cost uint64) *fsmpb.Usage {
	return &fsmpb.Usage{InputTokens: in, OutputTokens: out, CostMicros: cost, Model: "m1"}
}

// runTools claims and answers every queued CALL_TOOL Step of session.
func (d *driver) runTools(session string) {
	d.t.Helper()
	for _, st := range d.stepsOf(session, fsmpb.StepKind_STEP_KIND_CALL_TOOL) {
		if st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
			d.start(st).claim().result("ok")
		}
	}
}

func (d *driver) setBudget(id string, ch *fsmpb.BudgetChange) *Result {
	return d.try(&fsmpb.Command{Body: &fsmpb.Command_SetBudget{SetBudget: &fsmpb.SetBudget{SessionId: id, Change: ch}}})
}

func (d *driver) resume(id string) {
	d.t.Helper()
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ResumeSession{ResumeSession: &fsmpb.ResumeSession{SessionId: id}}})
}

// wantPaused fails unless session id is paused for reason, with a message
// holding each of words, and no model call queued.
func (d *driver) wantPaused(id string, reason fsmpb.PauseReason, words ...string) {
	d.t.Helper()
	s := d.session(id)
	if s.Status != fsmpb.SessionStatus_SESSION_STATUS_PAUSED || s.PauseReason != reason {
		d.t.Fatalf("session %s is %v (%v: %q); want paused for %v", id, s.Status, s.PauseReason, s.PauseMessage, reason)
	}
	for _, w := range words {
		if !strings.Contains(s.PauseMessage, w) {
			d.t.Fatalf("pause message %q does not say %q", s.PauseMessage, w)
		}
	}
	for _, st := range d.stepsOf(id, fsmpb.StepKind_STEP_KIND_RUN_MODEL) {
		if st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
			d.t.Fatalf("session %s is paused with model call %s queued", id, st.Id)
		}
	}
}

// A model call's usage is kept on its Step and totalled in its turn, its
// session and every ancestor's tree; tool calls are counted too.
func TestBudget_UsageIsTotalled(t *testing.T) {
	d := newDriver(t)
	d.createSession("p", "", "")
	d.createWithBudget("c", "p", nil)
	h := d.startNext("c", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim()
	h.answerUsing(usage(100, 20, 150), "looking", call("k1", "lookup", `{"q":"a"}`), call("k2", "lookup", `{"q":"b"}`))
	if got := d.step(h.st).Usage; !proto.Equal(got, usage(100, 20, 150)) {
		t.Fatalf("the model Step keeps usage %v", got)
	}
	c := d.session("c")
	want := &fsmpb.UsageTotals{InputTokens: 100, OutputTokens: 20, CostMicros: 150, ModelCalls: 1, ToolCalls: 2}
	for what, got := range map[string]*fsmpb.UsageTotals{"session": c.Usage, "tree": c.TreeUsage, "turn": c.Turn.Usage, "parent's tree": d.session("p").TreeUsage} {
		if !proto.Equal(got, want) {
			t.Errorf("%s usage %v, want %v", what, got, want)
		}
	}
	if u := d.session("p").Usage; u.GetModelCalls() != 0 {
		t.Errorf("the parent's own usage %v counts its child's", u)
	}
}

// Tokens and cost: a session whose usage reached its budget pauses before
// its next model call, the tool calls in flight recorded; raising the
// budget and resuming runs that model call.
func TestBudget_TokensPauseBeforeTheNextModelCallAndAResumeContinues(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget *fsmpb.Budget
		raise  *fsmpb.BudgetChange
		words  string
	}{
		{"tokens", &fsmpb.Budget{MaxTokens: 150}, &fsmpb.BudgetChange{MaxTokens: proto.Uint64(1000)}, "budget of 150 tokens"},
		{"cost", &fsmpb.Budget{MaxCostMicros: 100}, &fsmpb.BudgetChange{MaxCostMicros: proto.Uint64(0)}, "budget of 100 cost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t)
			d.createWithBudget("s", "", c.budget)
			d.startNext("s", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answerUsing(usage(140, 20, 150), "looking", call("k1", "lookup", `{}`))
			if d.session("s").Status == fsmpb.SessionStatus_SESSION_STATUS_PAUSED {
				t.Fatal("paused before the tool call of the output that crossed the budget ran")
			}
			d.runTools("s")
			d.wantPaused("s", fsmpb.PauseReason_PAUSE_REASON_BUDGET, c.words)
			if s := d.session("s"); s.Turn == nil || len(s.Turn.Calls) != 1 || s.Turn.Calls[0].Phase != fsmpb.CallPhase_CALL_PHASE_DONE {
				t.Fatalf("the paused turn lost its tool result: %v", s.Turn)
			}
			// Resumed without a raise, it pauses again at once.
			d.resume("s")
			d.wantPaused("s", fsmpb.PauseReason_PAUSE_REASON_BUDGET)
			if r := d.setBudget("s", c.raise); r.Err != nil {
				t.Fatal(r.Err)
			}
			d.wantPaused("s", fsmpb.PauseReason_PAUSE_REASON_BUDGET) // a raise alone does not resume
			d.resume("s")
			d.startNext("s", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answerUsing(usage(10, 10, 10), "done")
			if s := d.session("s"); s.Status != fsmpb.SessionStatus_SESSION_STATUS_IDLE || s.TurnsCompleted != 1 {
				t.Fatalf("after the raise and resume: %v, %d turns completed", s.Status, s.TurnsCompleted)
			}
		})
	}
}

// A child's usage counts toward its parent's budget: the child pauses,
// naming the ancestor, and the parent is told.
func TestBudget_AChildSpendsItsParentsBudget(t *testing.T) {
	d := newDriver(t)
	d.createWithBudget("p", "", &fsmpb.Budget{MaxTokens: 100})
	d.createWithBudget("c", "p", nil)
	d.startNext("c", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answerUsing(usage(90, 30, 0), "looking", call("k1", "lookup", `{}`))
	d.runTools("c")
	d.wantPaused("c", fsmpb.PauseReason_PAUSE_REASON_BUDGET, "ancestor p's budget of 100 tokens")
	if p := d.session("p"); tokens(p.TreeUsage) != 120 || p.InboxCount == 0 {
		t.Fatalf("parent: tree tokens %d, inbox %d; want 120 and the child's pause", tokens(p.TreeUsage), p.InboxCount)
	}
}

// Turns: a session that started max_turns turns pauses before the next,
// its message kept in the inbox.
func TestBudget_MaxTurns(t *testing.T) {
	d := newDriver(t)
	d.createWithBudget("s", "", &fsmpb.Budget{MaxTurns: 1})
	d.startNext("s", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("hi")
	d.send("s", "again")
	d.wantPaused("s", fsmpb.PauseReason_PAUSE_REASON_BUDGET, "max_turns")
	if s := d.session("s"); s.InboxCount != 1 || s.Turn != nil {
		t.Fatalf("inbox %d, turn %v; want the message waiting and no turn", s.InboxCount, s.Turn)
	}
	d.setBudget("s", &fsmpb.BudgetChange{MaxTurns: proto.Uint64(2)})
	d.resume("s")
	d.startNext("s", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("hi again")
	if s := d.session("s"); s.TurnsCompleted != 2 {
		t.Fatalf("%d turns completed after the raise", s.TurnsCompleted)
	}
}

// Per turn: more model calls, or tool calls, than the budget allows pause
// before the next model call.
func TestBudget_CallsPerTurn(t *testing.T) {
	d := newDriver(t)
	d.createWithBudget("m", "", &fsmpb.Budget{MaxModelCallsPerTurn: 1})
	d.startNext("m", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("looking", call("k1", "lookup", `{}`))
	d.runTools("m")
	d.wantPaused("m", fsmpb.PauseReason_PAUSE_REASON_BUDGET, "1 model calls")

	d.createWithBudget("t", "", &fsmpb.Budget{MaxToolCallsPerTurn: 1})
	d.startNext("t", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("one", call("k1", "lookup", `{"q":1}`))
	d.runTools("t")
	d.startNext("t", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("two", call("k2", "lookup", `{"q":2}`))
	d.runTools("t")
	d.wantPaused("t", fsmpb.PauseReason_PAUSE_REASON_BUDGET, "2 tool calls")
}

// The loop guard: the same call (arguments compared as canonical JSON)
// made loop_limit times in a turn pauses, naming it; a resume lets it be
// made loop_limit times more. One output asking for it twice counts once.
func TestLoopGuard(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "go")
	args := []string{`{"q":"x","n":1}`, `{"n":1, "q":"x"}`, `{"n":1,"q":"x"}`}
	d.startNext("s", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("a", call("a1", "lookup", args[0]), call("a2", "lookup", args[0]))
	d.runTools("s")
	for i, a := range args[1:] {
		d.startNext("s", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("again", call("b"+string(rune('1'+i)), "lookup", a))
		d.runTools("s")
	}
	d.wantPaused("s", fsmpb.PauseReason_PAUSE_REASON_LOOP, `lookup({"n":1,"q":"x"})`, "made 3 times")
	d.resume("s")
	for i := range 2 {
		d.startNext("s", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("more", call("c"+string(rune('1'+i)), "lookup", args[2]))
		d.runTools("s")
	}
	if s := d.session("s"); s.Status == fsmpb.SessionStatus_SESSION_STATUS_PAUSED {
		t.Fatalf("paused again after 2 more calls: %q", s.PauseMessage)
	}
	d.startNext("s", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("more", call("c3", "lookup", args[2]))
	d.runTools("s")
	d.wantPaused("s", fsmpb.PauseReason_PAUSE_REASON_LOOP, "made 6 times")

	// The limit comes from the budget; other arguments are another call.
	d.createWithBudget("l", "", &fsmpb.Budget{LoopLimit: 2})
	d.startNext("l", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("a", call("a1", "lookup", `{"q":1}`))
	d.runTools("l")
	d.startNext("l", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("b", call("b1", "lookup", `{"q":2}`))
	d.runTools("l")
	d.startNext("l", fsmpb.StepKind_STEP_KIND_RUN_MODEL).claim().answer("c", call("c1", "lookup", `{"q":1}`))
	d.runTools("l")
	d.wantPaused("l", fsmpb.PauseReason_PAUSE_REASON_LOOP, "loop limit is 2")
}

// SetBudget changes only the fields it names, and refuses a change of
// nothing or of an unknown session, changing nothing.
func TestBudget_SetBudget(t *testing.T) {
	d := newDriver(t)
	d.createWithBudget("s", "", &fsmpb.Budget{MaxTokens: 10, MaxTurns: 4})
	if r := d.setBudget("s", &fsmpb.BudgetChange{MaxTokens: proto.Uint64(0), LoopLimit: proto.Uint32(7)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if b := d.session("s").Budget; b.MaxTokens != 0 || b.MaxTurns != 4 || b.LoopLimit != 7 {
		t.Fatalf("budget %v after a change of max_tokens and loop_limit", b)
	}
	before := d.stateBytes()
	for _, c := range []struct {
		id   string
		ch   *fsmpb.BudgetChange
		code Code
	}{
		{"s", &fsmpb.BudgetChange{}, CodeInvalid},
		{"s", nil, CodeInvalid},
		{"nobody", &fsmpb.BudgetChange{MaxTurns: proto.Uint64(1)}, CodeNotFound},
	} {
		r := d.setBudget(c.id, c.ch)
		if r.Err == nil || r.Err.Code != c.code {
			t.Errorf("SetBudget %s %v: %v, want %v", c.id, c.ch, r.Err, c.code)
		}
	}
	if string(before) != string(d.stateBytes()) {
		t.Fatal("a refused SetBudget changed the state")
	}
}
