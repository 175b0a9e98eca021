package fsm

import (
	"bytes"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Predict names the Steps a command would leave ready to hand out, exactly
// as applying it then does, and changes nothing.
func TestPredict_NamesTheStepsACommandQueuesAndChangesNothing(t *testing.T) {
	d := newDriver(t)
	create := &fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: "s1", MessageId: "m1", Message: "hello",
	}}}
	before := d.stateBytes()
	got := d.f.Predict(create)
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("Predict changed the state")
	}
	d.do(create)
	want := d.queued("s1", fsmpb.StepKind_STEP_KIND_RUN_MODEL)
	if len(got) != 1 || got[0].Id != want.Id || got[0].Kind != want.Kind || got[0].Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("predicted %v; want %s", got, want.Id)
	}

	// The model calls a tool that needs approval and one that runs at once:
	// only the second is handed to a Worker.
	h := d.start(want)
	out := h.output("calling", call("c1", "deploy", `{}`), call("c2", "lookup", `{}`))
	got = d.f.Predict(out)
	d.do(out)
	if len(got) != 1 || got[0].Tool != "lookup" || d.step(got[0].Id).Status != fsmpb.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("predicted %v; want the queued lookup call", got)
	}
	if approval := d.latest("s1", fsmpb.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL); approval == nil {
		t.Fatal("no approval wait: the test does not exercise a wait")
	}

	// A rejected command, one that queues nothing, and a halted machine
	// predict nothing.
	if got := d.f.Predict(create); got != nil {
		t.Fatalf("a repeated CreateSession predicted %v", got)
	}
	if got := d.f.Predict(&fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w2"}}}); got != nil {
		t.Fatalf("a registration predicted %v", got)
	}
	if got := d.f.Predict(&fsmpb.Command{}); got != nil {
		t.Fatalf("an empty command predicted %v", got)
	}
	d.f.halt(d.index+1, "test")
	if got := d.f.Predict(&fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s1", MessageId: "m2", Text: "more"}}}); got != nil {
		t.Fatalf("a halted machine predicted %v", got)
	}
}

// A command that completes what one still in flight began is predicted
// over it: the second of two tool results queues the model's next call.
func TestPredict_AppliesTheCommandsStillInFlightFirst(t *testing.T) {
	d := newDriver(t)
	d.createSession("s1", "", "hello")
	d.startNext("s1", kRunModel).claim().answer("calling", call("c1", "lookup", `{}`), call("c2", "lookup", `{}`))
	tools := d.stepsOf("s1", fsmpb.StepKind_STEP_KIND_CALL_TOOL)
	if len(tools) != 2 {
		t.Fatalf("%d tool Steps; want 2", len(tools))
	}
	first, second := d.start(tools[0]).claim(), d.start(tools[1]).claim()
	r1, r2 := first.toolResult("one", false, ""), second.toolResult("two", false, "")

	if got := d.f.Predict(r2); got != nil {
		t.Fatalf("the second result alone predicted %v; want nothing (the first call is still open)", got)
	}
	before := d.stateBytes()
	got := d.f.Predict(r2, r1)
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("Predict changed the state")
	}
	d.do(r1)
	// r1 is applied now but the leader may not have seen it yet: a command
	// listed in flight that is already applied is a replay and changes
	// nothing in the prediction.
	again := d.f.Predict(r2, r1)
	d.do(r2)
	want := d.queued("s1", kRunModel)
	for name, p := range map[string][]*fsmpb.Step{"in flight": got, "already applied": again} {
		if len(p) != 1 || p[0].Id != want.Id {
			t.Fatalf("%s: predicted %v; want the model's next call %s", name, p, want.Id)
		}
	}
}

// Commands that do not move a turn on can still start one, so the command
// table says they may queue Steps and the leader predicts them: a restart
// retries an errored session's kept turn, and deleting or expiring a child
// tells its idle parent, which starts a turn on the message.
func TestPredict_RestartDeleteAndExpireQueueSteps(t *testing.T) {
	predicts := func(t *testing.T, d *driver, cmd *fsmpb.Command, session string) {
		t.Helper()
		if !MayQueueSteps(cmd) {
			t.Errorf("the command table says %T queues no Steps", cmd.Body)
		}
		cmd.NowMs = d.now
		got := d.f.Predict(cmd)
		d.do(cmd)
		want := d.queued(session, kRunModel)
		if len(got) != 1 || got[0].Id != want.Id {
			t.Fatalf("%T predicted %v; want %s", cmd.Body, got, want.Id)
		}
	}
	t.Run("restart", func(t *testing.T) {
		d := newDriver(t)
		childWithToolResults(t, d)
		d.startNext("c", kRunModel).fail(eInvalid, "no")
		wantStatus(t, d.session("c"), sErrored)
		d.newEpoch()
		predicts(t, d, &fsmpb.Command{Body: &fsmpb.Command_RestartSessions{RestartSessions: &fsmpb.RestartSessions{Epoch: d.epoch}}}, "c")
	})
	t.Run("delete", func(t *testing.T) {
		d := newDriver(t)
		finishedSession(d, "p", "", 0)
		finishedSession(d, "c", "p", 0)
		predicts(t, d, deleteCmd("c"), "p")
	})
	t.Run("expire", func(t *testing.T) {
		d := newDriver(t)
		finishedSession(d, "p", "", 0)
		finishedSession(d, "c", "p", 0)
		d.advance(time.Hour)
		predicts(t, d, &fsmpb.Command{Body: &fsmpb.Command_ExpireSessions{ExpireSessions: &fsmpb.ExpireSessions{
			Epoch: d.epoch, IdleBeforeMs: d.now, SessionIds: []string{"c"},
		}}}, "p")
	})
}

// A prediction works on a copy of the state: it neither waits for an Apply
// in progress nor holds one up, so a proposer that predicts never stalls
// raft's apply goroutine.
func TestPredict_NeverWaitsForApply(t *testing.T) {
	d := newDriver(t)
	create := &fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: "s1", MessageId: "m1", Message: "hello",
	}}}
	d.f.mu.Lock() // as Apply holds it for a whole batch
	got := make(chan []*fsmpb.Step, 1)
	go func() { got <- d.f.Predict(create) }()
	select {
	case ready := <-got:
		if len(ready) != 1 || ready[0].Kind != fsmpb.StepKind_STEP_KIND_RUN_MODEL {
			t.Errorf("predicted %v; want the turn's RunModel", ready)
		}
	case <-time.After(10 * time.Second):
		t.Error("Predict waited for the lock Apply holds")
	}
	d.f.mu.Unlock()
	d.do(create)
	if d.queued("s1", fsmpb.StepKind_STEP_KIND_RUN_MODEL) == nil {
		t.Fatal("the command applied after the prediction queued nothing")
	}
}
